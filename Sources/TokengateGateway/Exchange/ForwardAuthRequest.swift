//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateHTTP

/// The request a front proxy asks about, rebuilt from its check request: the original method, target and host
/// from where the listener's header shape (``ForwardAuthHeaders``) puts them, and the client's other fields as
/// the proxy passed them on (its `Authorization`, `Cookie`, `Origin`, `Sec-Fetch-Site`). The result then goes
/// through the same head checks, route match and ``RequestAuthorizer`` as a proxied request.
///
/// ### Function
/// Each field the shape reads must be there exactly once: a proxy that appends to a field the client sent
/// (rather than replacing it) leaves two, and which one is the proxy's cannot be told, so neither is believed.
/// The rebuilt head has no body framing (`Content-Length`, `Transfer-Encoding`): the front proxies send no body
/// with a check, so the route's `form:` and `json:` sources are never looked at. The shape's own fields are
/// left out, and `Host` is the original host, which the same-site rule for cookies compares `Origin` with.
///
/// The scheme must be `https`: tokens travel only over TLS, as on the public listeners.
enum ForwardAuthRequest {
    enum Outcome: Equatable {
        case request(ClientRequestHead)
        case refused(GatewayAnswer)
    }

    /// The longest method accepted: the registered ones are at most 17 bytes (`VERSION-CONTROL`).
    static let maxMethodBytes = 32

    static func original(of check: ClientRequestHead, headers shape: ForwardAuthHeaders, pathPrefix: String) -> Outcome {
        let fields = check.fields
        let methodText: String?
        let target: String
        let host: String
        let omitted: [StaticString]
        switch shape {
        case .nginx:
            guard let method = Self.single("x-original-method", fields) else { return .refused(Self.missing("X-Original-Method")) }
            guard let uri = Self.single("x-original-uri", fields) else { return .refused(Self.missing("X-Original-URI")) }
            guard let value = Self.single("host", fields) else { return .refused(Self.missing("Host")) }
            (methodText, target, host) = (method, uri, value)
            omitted = ["host", "x-original-method", "x-original-uri"]
        case .forwarded:
            guard let method = Self.single("x-forwarded-method", fields) else { return .refused(Self.missing("X-Forwarded-Method")) }
            guard let uri = Self.single("x-forwarded-uri", fields) else { return .refused(Self.missing("X-Forwarded-Uri")) }
            guard let value = Self.single("x-forwarded-host", fields) else { return .refused(Self.missing("X-Forwarded-Host")) }
            (methodText, target, host) = (method, uri, value)
            omitted = ["host", "x-forwarded-method", "x-forwarded-uri", "x-forwarded-host"]
        case .envoy:
            // ext_authz sends the original method, and `path_prefix` followed by the original path and query.
            guard check.uri.hasPrefix(pathPrefix), check.uri.utf8.dropFirst(pathPrefix.utf8.count).first == UInt8(ascii: "/") else {
                return .refused(.checkMalformed("the check path does not start with the listener's path_prefix and a /"))
            }
            guard let value = Self.single("host", fields) else { return .refused(Self.missing("Host")) }
            (methodText, target, host) = (nil, String(check.uri.dropFirst(pathPrefix.count)), value)
            omitted = ["host"]
        }
        guard let proto = Self.single("x-forwarded-proto", fields) else { return .refused(Self.missing("X-Forwarded-Proto")) }
        guard proto.lowercased() == "https" else { return .refused(.checkTLSRequired()) }
        var method = check.method
        if let methodText {
            guard methodText.utf8.count <= Self.maxMethodBytes, !methodText.isEmpty, methodText.utf8.allSatisfy(Self.isTokenByte) else {
                return .refused(.checkMalformed("the forwarded method is not an HTTP method"))
            }
            method = HTTPMethod(rawValue: methodText)
        }
        guard target.hasPrefix("/") else {
            return .refused(.checkMalformed("the forwarded target must be an absolute path"))
        }
        var original = RequestFields()
        original.reserveCapacity(fields.bytes.count)
        original.add(name: "host", value: host)
        fields.forEach { name, value in
            if FieldBytes.equalsIgnoringCase(name, "content-length") || FieldBytes.equalsIgnoringCase(name, "transfer-encoding") {
                return
            }
            for field in omitted where FieldBytes.equalsIgnoringCase(name, field) {
                return
            }
            original.add(name: name, value: value)
        }
        return .request(ClientRequestHead(version: check.version, method: method, uri: target, fields: original, isKeepAlive: check.isKeepAlive))
    }

    /// The value of the field `name` when it is there exactly once.
    private static func single(_ name: StaticString, _ fields: RequestFields) -> String? {
        guard fields.count(name: name) == 1 else { return nil }
        return fields.first(name: name)
    }

    private static func missing(_ name: String) -> GatewayAnswer {
        .checkMalformed("the check request needs exactly one \(name) field")
    }

    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
