//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOHTTP1
import TokengateHTTP

/// One access-log line: what incident response asks of a request — who sent it (`client`), to which `host`,
/// what it asked (`method`, `path`, `protocol`, `user_agent`), what it got (`status`, `reason`, `bytes_out`)
/// and how long it took (`duration_us`, of which `upstream_us` waiting for the backend's head), which
/// `route`, `upstream` and backend address (`upstream_addr`) served it, and whose token it carried (`user`,
/// `token_kind`).
///
/// Every value a client chose is bounded and cleaned before it is written: the path goes through
/// ``AccessLogPath`` (no query, JWT-shaped runs replaced), and the host and user agent through
/// ``clientText(_:maxBytes:)`` (the same replacement, cut at a length). A member with no value for this
/// request (no token, not forwarded, a refusal read before the body) is left out rather than written empty.
struct AccessLogRecord {
    var requestID: String?
    var client: String?
    var host: String?
    var method: String?
    /// The request target as sent or normalized; written through ``AccessLogPath``.
    var target: String?
    /// `HTTP/1.1`, `HTTP/2`, `HTTP/1.0`.
    var protocolName: String?
    var status: UInt
    var reason: String
    var route: String?
    var bytesIn: Int?
    var bytesOut: Int?
    var durationMicroseconds: Int64?
    var upstream: String?
    var upstreamAddress: String?
    var upstreamMicroseconds: Int64?
    var user: String?
    var tokenKind: String?
    var userAgent: String?

    static let maxHostBytes = 256
    static let maxUserAgentBytes = 256

    init(status: UInt, reason: String) {
        self.status = status
        self.reason = reason
    }

    /// `HTTP/2` for any major version 2, else `HTTP/major.minor`.
    static func protocolName(_ version: HTTPVersion) -> String {
        switch (version.major, version.minor) {
        case (1, 1): "HTTP/1.1"
        case (2, _): "HTTP/2"
        case (1, 0): "HTTP/1.0"
        default: "HTTP/\(version.major).\(version.minor)"
        }
    }

    /// The line's members. Plain `.string` values: an interpolated one goes through
    /// `DefaultStringInterpolation` per member.
    var metadata: Logger.Metadata {
        var metadata: Logger.Metadata = [
            "status": .string(String(self.status)),
            "reason": .string(self.reason),
        ]
        func put(_ key: String, _ value: String?) {
            if let value { metadata[key] = .string(value) }
        }
        put("request_id", self.requestID)
        put("client", self.client)
        put("host", self.host.map { Self.clientText($0, maxBytes: Self.maxHostBytes) })
        put("method", self.method)
        put("path", self.target.map { AccessLogPath.text(for: $0) })
        put("protocol", self.protocolName)
        put("route", self.route)
        put("bytes_in", self.bytesIn.map { String($0) })
        put("bytes_out", self.bytesOut.map { String($0) })
        put("duration_us", self.durationMicroseconds.map { String($0) })
        put("upstream", self.upstream)
        put("upstream_addr", self.upstreamAddress)
        put("upstream_us", self.upstreamMicroseconds.map { String($0) })
        put("user", self.user)
        put("token_kind", self.tokenKind)
        put("user_agent", self.userAgent.map { Self.clientText($0, maxBytes: Self.maxUserAgentBytes) })
        return metadata
    }

    /// A field value a client chose, as the log may hold it: JWT-shaped runs replaced by `[token]` (a client
    /// that puts its token in the wrong field must not get it logged), cut at `maxBytes` on a UTF-8
    /// boundary with `…` after the cut.
    static func clientText(_ value: String, maxBytes: Int) -> String {
        var value = value
        return value.withUTF8 { bytes in
            guard bytes.count > maxBytes || JWTShape.firstRange(in: bytes) != nil else {
                return String(decoding: bytes, as: UTF8.self)  // The common case: the value as it came.
            }
            var text: [UInt8] = []
            var rest = bytes
            while let token = JWTShape.firstRange(in: rest) {
                text.append(contentsOf: rest[..<token.lowerBound])
                text.append(contentsOf: "[token]".utf8)
                rest = UnsafeBufferPointer(rebasing: rest[token.upperBound...])
            }
            text.append(contentsOf: rest)
            guard text.count > maxBytes else { return String(decoding: text, as: UTF8.self) }
            var cut = maxBytes
            while cut > 0, text[cut] & 0xC0 == 0x80 { cut -= 1 }
            return String(decoding: text[..<cut], as: UTF8.self) + "…"
        }
    }
}
