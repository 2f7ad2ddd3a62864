//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A listening address as written in the configuration: `host:port`, `[v6]:port` or `hostname:port`.
///
/// IPv6 hosts are stored without brackets (`::1`); ``description`` puts them back.
/// Port 0 is allowed and means "any free port" (useful in tests); it is excluded from duplicate checks.
public struct SocketAddressSpec: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Whether the host is an IPv6 literal.
    public var isIPv6: Bool { self.host.contains(":") }

    /// Whether the address only accepts connections from this machine: `127.0.0.0/8`, `::1` or `localhost`.
    public var isLoopback: Bool {
        if self.host.lowercased() == "localhost" {
            return true
        }
        if let v4 = IPAddressParser.ipv4(self.host) {
            return v4[0] == 127
        }
        if let v6 = IPAddressParser.ipv6(self.host) {
            return v6 == [UInt8](repeating: 0, count: 15) + [1]
        }
        return false
    }

    /// Whether the host is the wildcard address of its family (`0.0.0.0` or `::`).
    public var isWildcard: Bool {
        if let v4 = IPAddressParser.ipv4(self.host) {
            return v4 == [0, 0, 0, 0]
        }
        if let v6 = IPAddressParser.ipv6(self.host) {
            return v6 == [UInt8](repeating: 0, count: 16)
        }
        return false
    }

    public var description: String {
        self.isIPv6 ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    /// Whether two listeners could not both bind: same port and the same host, or one of them a wildcard
    /// (`::` also takes IPv4 on dual-stack hosts, so it conflicts with every host on that port).
    func conflicts(with other: SocketAddressSpec) -> Bool {
        guard self.port == other.port, self.port != 0 else {
            return false
        }
        if self.host.lowercased() == other.host.lowercased() {
            return true
        }
        if self.host == "::" || other.host == "::" {
            return true
        }
        if self.isWildcard || other.isWildcard {
            return self.isIPv6 == other.isIPv6
        }
        return false
    }
}
