//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTLS

/// Whether a request names a host its connection's certificate does not cover (RFC 9110 §15.5.20): the
/// request is then answered `421 Misdirected Request` before its token is looked at or a route is chosen.
///
/// ### Why
/// On a listener with several certificates, SNI picks one per connection, and the client validates that
/// one for the name it connected to. Without this check the connection carries requests for any host:
/// a client (or an attacker's script) connects for `a.example.com` and sends `Host: b.example.com`,
/// reaching `b`'s routes over a connection nobody validated for `b`. A client that coalesces connections
/// legitimately (a certificate valid for both names, RFC 9113 §9.1.1) is not affected; one whose
/// certificate does not cover the host is told to open a connection of its own for it, which browsers and
/// curl's HTTP/2 do on a `421`.
///
/// ### What is compared
/// The `Host` value (HTTP/2's `:authority` arrives as `Host`), without its port and one trailing dot,
/// compared case-insensitively with ``TLSCertificateNames``. Not compared, so always passed on to routing:
/// - an IP literal (`127.0.0.1`, `[::1]`): SNI cannot carry one (RFC 6066 §3), so a client connecting to an
///   address sends none and gets the default certificate; a request for an address reaches the same routes
///   over any connection;
/// - a request with no host, or an empty one (HTTP/1.0, or `Host:` with nothing), which names no origin.
///
/// The host was already checked to be `uri-host [":" port]` (``HostFieldCheck``).
enum MisdirectedRequestCheck {
    /// Whether `host`, a request's whole `Host` value, is misdirected on a connection whose certificate
    /// covers `names`.
    static func isMisdirected(host: UnsafeRawBufferPointer, names: TLSCertificateNames) -> Bool {
        guard let bare = Self.nameToCheck(host) else { return false }
        return !names.covers(bare)
    }

    /// The DNS name of `host` without its port and trailing dot, or `nil` when it names none: empty, or an
    /// IP literal.
    static func nameToCheck(_ host: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        guard let first = host.first, first != UInt8(ascii: "[") else { return nil }
        var end = host.firstIndex(of: UInt8(ascii: ":")) ?? host.count
        if end > 0, host[end - 1] == UInt8(ascii: ".") {
            end -= 1
        }
        let name = UnsafeRawBufferPointer(rebasing: host[..<end])
        // An IPv4 address (digits and dots only). No DNS name is all digits: its last label, a top-level
        // domain, never is.
        guard !name.isEmpty, !name.allSatisfy({ $0 == UInt8(ascii: ".") || (0x30...0x39).contains($0) }) else {
            return nil
        }
        return name
    }
}
