//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Which token kinds a route accepts. A valid token of another kind is rejected with
/// ``RejectionReason/wrongKind`` (the gateway answers 403 `insufficient_scope`).
public struct AcceptedKinds: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8

    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    public static let api = AcceptedKinds(rawValue: 1 << 0)
    public static let session = AcceptedKinds(rawValue: 1 << 1)
    public static let any: AcceptedKinds = [.api, .session]

    /// Whether this set contains the given kind.
    @inlinable
    public func accepts(_ kind: TokenKind) -> Bool {
        switch kind {
        case .api: return self.contains(.api)
        case .session: return self.contains(.session)
        }
    }
}
