//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Allow and deny lists of networks, judged on the client address (a route's or a listener's `ip_rules`).
///
/// A deny entry always wins; then, when an allow list is given, only addresses on it pass. An address the
/// gateway could not read (no peer address, which a Unix socket would give) passes only where no rule is
/// set: a rule is never satisfied by the absence of an address (fail closed).
public struct IPRules: Sendable, Equatable {
    public var allow: [CIDR]
    public var deny: [CIDR]

    public init(allow: [CIDR] = [], deny: [CIDR] = []) {
        self.allow = allow
        self.deny = deny
    }

    /// No rule at all: every request passes without a look at its address.
    public var isEmpty: Bool { self.allow.isEmpty && self.deny.isEmpty }

    /// Whether a request from `address` (4 or 16 bytes) passes.
    public func permits(_ address: [UInt8]?) -> Bool {
        if self.isEmpty { return true }
        guard let address else { return false }
        if self.deny.contains(where: { $0.contains(address) }) { return false }
        return self.allow.isEmpty || self.allow.contains { $0.contains(address) }
    }
}
