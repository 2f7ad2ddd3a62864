//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// Where the load goes: an `https://` URL on loopback. Anything else is refused, so a typo cannot turn the
/// bench into traffic against another machine.
struct BenchTarget: Sendable, CustomStringConvertible {
    /// The address connected to (`localhost` becomes 127.0.0.1).
    let connectHost: String
    let port: Int
    /// The request target (path and query) every request uses.
    let path: String
    /// The `Host` header.
    let hostHeader: String
    /// SNI and certificate verification name.
    let serverName: String

    init(url text: String, serverName: String?) throws {
        guard let url = URLComponents(string: text), url.scheme?.lowercased() == "https",
            let host = url.host, !host.isEmpty
        else {
            throw BenchError("invalid_url", "--url must be https://HOST[:PORT]/PATH (the gateway speaks TLS only)")
        }
        let bare = host.hasPrefix("[") ? String(host.dropFirst().dropLast()) : host
        guard Self.isLoopback(bare) else {
            throw BenchError("not_loopback", "--url must point at loopback (127.0.0.0/8, ::1 or localhost)")
        }
        guard url.user == nil, url.password == nil, url.fragment == nil else {
            throw BenchError("invalid_url", "--url takes no credentials and no fragment")
        }
        self.connectHost = bare == "localhost" ? "127.0.0.1" : bare
        self.port = url.port ?? 443
        var path = url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath
        if let query = url.percentEncodedQuery { path += "?" + query }
        self.path = path
        let hostPart = bare.contains(":") ? "[\(bare)]" : bare
        self.hostHeader = self.port == 443 ? hostPart : "\(hostPart):\(self.port)"
        self.serverName = serverName ?? (bare == "127.0.0.1" || bare == "::1" ? "localhost" : bare)
    }

    var description: String {
        let host = self.connectHost.contains(":") ? "[\(self.connectHost)]" : self.connectHost
        return "https://\(host):\(self.port)\(self.path)"
    }

    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets.allSatisfy({ $0.count <= 3 && UInt8($0) != nil }) else { return false }
        return octets[0] == "127"
    }
}
