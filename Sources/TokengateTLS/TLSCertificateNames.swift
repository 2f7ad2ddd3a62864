//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The host names one server certificate answers for: the hosts a request on a connection that got this
/// certificate may name.
///
/// A client may send a request for any origin the connection's certificate is valid for (RFC 9110 §4.3.4,
/// RFC 9113 §9.1.1), so a host outside these names on such a connection is misdirected: the client either
/// did not check the certificate or chose to send it there anyway. The gateway answers such a request `421`
/// instead of routing it.
///
/// ### Which names
/// Built by ``TLSServerContext`` from the certificate's DNS subjectAltNames (its subject CN when it has none,
/// as `X509_check_host` and clients fall back to), together with the certificate's configured
/// `server_names`: the names a client can have validated, and the names the operator assigned to this
/// certificate (a configured name the certificate lacks is already warned about at start).
///
/// ### Matching (RFC 6125 §6.4)
/// ASCII case-insensitive. `*.example.com` covers exactly one further label (`a.example.com`, neither
/// `example.com` nor `a.b.example.com`); a wildcard that is not a whole leftmost label (`a*.example.com`) or
/// that stands over a single label (`*.com`) covers nothing, as in ``TLSServerNameMatcher``.
///
/// ### Implementation
/// Names are kept as lowercased bytes, so the per-request ``covers(_:)`` is a scan over a few short arrays
/// with no allocation: a certificate holds a handful of names, not thousands.
public struct TLSCertificateNames: Sendable, Equatable {
    /// Exact names, lowercased, without a trailing dot.
    private var exact: [[UInt8]] = []
    /// What follows `*.` in each wildcard name, lowercased (`example.com` for `*.example.com`).
    private var wildcardParents: [[UInt8]] = []

    /// - Parameter names: DNS names and `*.domain` wildcards, in any case, with or without one trailing dot.
    ///   Names that cannot cover a host (empty, a partial or lone wildcard) are left out.
    public init(_ names: [String]) {
        for name in names {
            var bytes = Array(name.utf8).map { (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
            if bytes.last == UInt8(ascii: ".") {
                bytes.removeLast()
            }
            if bytes.count > 2, bytes[0] == UInt8(ascii: "*"), bytes[1] == UInt8(ascii: ".") {
                let parent = Array(bytes.dropFirst(2))
                guard parent.contains(UInt8(ascii: ".")), !parent.contains(UInt8(ascii: "*")),
                    parent.first != UInt8(ascii: "."), !self.wildcardParents.contains(parent)
                else { continue }
                self.wildcardParents.append(parent)
            } else if !bytes.isEmpty, !bytes.contains(UInt8(ascii: "*")), !self.exact.contains(bytes) {
                self.exact.append(bytes)
            }
        }
    }

    /// Whether no name was kept: such a certificate covers no host.
    public var isEmpty: Bool {
        self.exact.isEmpty && self.wildcardParents.isEmpty
    }

    /// Whether `host` is one of the names or one label under one of the wildcards.
    ///
    /// - Parameter host: a bare host name in any case: without a port, and without the one trailing dot a
    ///   fully qualified name may carry (the caller strips both).
    public func covers(_ host: UnsafeRawBufferPointer) -> Bool {
        guard !host.isEmpty else { return false }
        for name in self.exact where Self.equalsLowercased(host, name) {
            return true
        }
        guard !self.wildcardParents.isEmpty,
            let dot = host.firstIndex(of: UInt8(ascii: ".")), dot > 0
        else { return false }
        let parent = UnsafeRawBufferPointer(rebasing: host[(dot + 1)...])
        for name in self.wildcardParents where Self.equalsLowercased(parent, name) {
            return true
        }
        return false
    }

    /// `candidate`, lowercased, equals `lowercased`: compared byte by byte, without making a lowercased copy.
    private static func equalsLowercased(_ candidate: UnsafeRawBufferPointer, _ lowercased: [UInt8]) -> Bool {
        guard candidate.count == lowercased.count else { return false }
        for offset in 0..<candidate.count {
            var byte = candidate[offset]
            if byte >= 0x41, byte <= 0x5A {
                byte |= 0x20
            }
            if byte != lowercased[offset] {
                return false
            }
        }
        return true
    }
}
