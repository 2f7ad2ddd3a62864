//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateHTTP

/// The request's client address as the gateway determines it: one value for the IP rules, the rate limits,
/// the access log and the `X-Forwarded-For` the backend gets.
///
/// It starts from the connection's address (the TCP peer, or the client a PROXY protocol header named,
/// which so takes precedence over any field). When that address is a trusted proxy (`trusted_proxies`), the
/// `X-Forwarded-For` chain is read from its right end, where each proxy appended the address it saw: each
/// entry that is itself a trusted proxy passes the walk on to the entry before it, and the first entry that is
/// not is the client. Everything left of it was written by the client, who can write anything, and is never
/// believed. An entry that is not an IP address ends the walk at the trusted proxy that reported it. A chain
/// of trusted proxies only ends at its leftmost entry.
struct ClientAddress: Sendable, Equatable {
    /// The address as text (canonical when it came from the socket or a PROXY header; as the trusted proxy
    /// wrote it otherwise), `nil` when the connection has none.
    let text: String?
    /// The chain for the backend's `X-Forwarded-For`: the client and the trusted proxies after it, the
    /// connection's address last.
    let forwardedFor: String?

    /// The most chain entries walked: a longer chain is cut at this many from the right (proxies in front of
    /// a gateway are a handful).
    static let maximumHops = 32

    /// - Parameters:
    ///   - peer: the connection's address.
    ///   - forwardedFor: the request's `X-Forwarded-For` values, one per field line.
    ///   - trusted: `trusted_proxies`.
    static func resolve(peer: String?, forwardedFor: [String], trusted: [CIDR]) -> ClientAddress {
        guard let peer, !trusted.isEmpty, Self.isTrusted(peer, trusted) else {
            return ClientAddress(text: peer, forwardedFor: peer)
        }
        var entries: [Substring] = []
        for value in forwardedFor {
            for entry in value.split(separator: ",") {
                let trimmed = entry.trimmingOWS()
                if !trimmed.isEmpty { entries.append(trimmed) }
            }
        }
        var chain = [Substring(peer)]
        var client = peer
        for entry in entries.reversed().prefix(Self.maximumHops) {
            guard let bytes = IPAddressParser.bytes(entry) else { break }
            chain.append(entry)
            client = String(entry)
            if !trusted.contains(where: { $0.contains(bytes) }) { break }
        }
        return ClientAddress(text: client, forwardedFor: chain.reversed().joined(separator: ", "))
    }

    /// The address's 4 or 16 bytes, for the IP rules and the per-client buckets; `nil` when there is none.
    var bytes: [UInt8]? { self.text.flatMap { IPAddressParser.bytes($0) } }

    private static func isTrusted(_ address: String, _ trusted: [CIDR]) -> Bool {
        guard let bytes = IPAddressParser.bytes(address) else { return false }
        return trusted.contains { $0.contains(bytes) }
    }
}
