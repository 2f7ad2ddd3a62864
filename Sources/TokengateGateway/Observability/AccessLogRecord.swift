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
    /// The JWT issuer's configured name, on a gateway with several.
    var issuer: String?
    var userAgent: String?
    /// `check` for a front proxy's check on a `forward_auth` listener (its `host`, `method` and `path` are the
    /// original request's; `client` is the front proxy); left out for a proxied request.
    var mode: String?

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

    /// The line's members. Plain `.string` values (an interpolated one goes through `DefaultStringInterpolation`
    /// per member), into a dictionary sized for all of them at once: grown member by member, it was rehashed
    /// three times a line.
    var metadata: Logger.Metadata {
        var metadata = Logger.Metadata(minimumCapacity: 20)
        metadata["status"] = .string(String(self.status))
        metadata["reason"] = .string(self.reason)
        if let value = self.requestID { metadata["request_id"] = .string(value) }
        if let value = self.client { metadata["client"] = .string(value) }
        if let value = self.host { metadata["host"] = .string(Self.clientText(value, maxBytes: Self.maxHostBytes)) }
        if let value = self.method { metadata["method"] = .string(value) }
        if let value = self.target { metadata["path"] = .string(AccessLogPath.text(for: value)) }
        if let value = self.protocolName { metadata["protocol"] = .string(value) }
        if let value = self.route { metadata["route"] = .string(value) }
        if let value = self.issuer { metadata["issuer"] = .string(value) }
        if let value = self.mode { metadata["mode"] = .string(value) }
        if let value = self.bytesIn { metadata["bytes_in"] = .string(String(value)) }
        if let value = self.bytesOut { metadata["bytes_out"] = .string(String(value)) }
        if let value = self.durationMicroseconds { metadata["duration_us"] = .string(String(value)) }
        if let value = self.upstream { metadata["upstream"] = .string(value) }
        if let value = self.upstreamAddress { metadata["upstream_addr"] = .string(value) }
        if let value = self.upstreamMicroseconds { metadata["upstream_us"] = .string(String(value)) }
        if let value = self.user { metadata["user"] = .string(value) }
        if let value = self.tokenKind { metadata["token_kind"] = .string(value) }
        if let value = self.userAgent {
            metadata["user_agent"] = .string(Self.clientText(value, maxBytes: Self.maxUserAgentBytes))
        }
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
