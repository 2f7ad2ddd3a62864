//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig

/// Finds the token of a request in the places its route lists (DESIGN §2), and refuses the shapes RFC
/// 6750 forbids: a token in the URL, tokens sent more than one way, a cookie token on a cross-site
/// unsafe request.
///
/// Pure: no I/O, no clock. The connection handler calls ``extract(method:uri:headers:body:)`` once with
/// `body: nil`; when the answer is ``Outcome/needsBody`` it reads the body (up to the route's limit) and
/// calls again with it.
struct TokenExtractor: Sendable {
    enum Outcome: Equatable {
        /// No token anywhere the route looks.
        case noToken
        /// A slice of the header or cookie value it was found in (or the decoded body field): no copy per request.
        case token(Substring, TokenSource)
        /// A body source applies to this request (a form or JSON body on a route that reads one).
        case needsBody
        case answer(GatewayAnswer)
    }

    let sources: [TokenSource]
    let realm: String
    /// Query parameter names that betray a token in the URL: `access_token` (RFC 6750 §2.3) and the
    /// names of the route's own cookie, form and JSON sources.
    private let queryTokenNames: Set<String>

    init(sources: [TokenSource], realm: String) {
        self.sources = sources
        self.realm = realm
        var names: Set<String> = ["access_token", "auth_token", "id_token", "token", "jwt", "bearer"]
        for source in sources {
            switch source {
            case .authorization: break
            case .header(let name): names.insert(name.lowercased())
            case .cookie(let name), .form(let name), .json(let name): names.insert(name.lowercased())
            }
        }
        self.queryTokenNames = names
    }

    func extract(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: [UInt8]?) -> Outcome {
        if self.queryCarriesToken(uri) {
            return .answer(
                .invalidRequest("tokens must not be sent in the URL", realm: self.realm, reason: "token_in_url")
            )
        }
        // The first token found and how many there were: more than one is refused, so one is all that is kept.
        var found: (Substring, TokenSource)?
        var foundCount = 0
        func record(_ token: Substring, _ source: TokenSource) {
            foundCount += 1
            if found == nil { found = (token, source) }
        }
        var bodyWanted = false
        for source in self.sources {
            switch source {
            case .authorization:
                guard let value = headers.first(name: "authorization") else { continue }
                if headers.count(name: "authorization") > 1 {
                    return .answer(self.invalid("more than one Authorization header", reason: "multiple_tokens"))
                }
                switch Self.bearerToken(value) {
                case .notBearer: continue
                case .malformed:
                    return .answer(self.invalid("malformed Bearer credentials", reason: "malformed_authorization"))
                case .token(let token): record(token, source)
                }
            case .header(let name):
                let values = headers[name]
                if values.count > 1 {
                    return .answer(self.invalid("more than one token header", reason: "multiple_tokens"))
                }
                guard let value = values.first else { continue }
                let trimmed = Substring(value).trimmingOWS()
                if !trimmed.isEmpty { record(trimmed, source) }
            case .cookie(let name):
                let values = CookieHeader.values(named: name, in: headers["cookie"])
                if values.count > 1 {
                    return .answer(self.invalid("more than one token cookie", reason: "multiple_tokens"))
                }
                guard let value = values.first, !value.isEmpty else { continue }
                if Self.isUnsafe(method), !Self.isSameSite(headers) {
                    return .answer(.crossSiteCookie(realm: self.realm))
                }
                record(value, source)
            case .form(let field):
                guard Self.hasBody(headers), Self.contentType(headers) == "application/x-www-form-urlencoded" else {
                    continue
                }
                guard let body else {
                    bodyWanted = true
                    continue
                }
                let values = FormURLEncoded.values(named: field, in: body)
                if values.count > 1 {
                    return .answer(self.invalid("more than one token field in the body", reason: "multiple_tokens"))
                }
                guard let first = values.first else { continue }
                guard let value = first else {
                    return .answer(self.invalid("the token field is not valid form encoding", reason: "malformed_body"))
                }
                if !value.isEmpty { record(Substring(value), source) }
            case .json(let field):
                guard Self.hasBody(headers), Self.contentType(headers) == "application/json" else { continue }
                guard let body else {
                    bodyWanted = true
                    continue
                }
                switch Self.jsonToken(field, in: body) {
                case .absent:
                    continue
                case .invalid:
                    return .answer(self.invalid("the JSON body is not an object with a string token field", reason: "malformed_body"))
                case .repeated:
                    return .answer(self.invalid("more than one token field in the body", reason: "multiple_tokens"))
                case .value(let value):
                    if !value.isEmpty { record(Substring(value), source) }
                }
            }
        }
        if foundCount > 1 {
            return .answer(self.invalid("the token was sent in more than one way", reason: "multiple_tokens"))
        }
        if let (token, source) = found {
            // A body the route would read could still hold a second token: read it before deciding.
            return bodyWanted ? .needsBody : .token(token, source)
        }
        return bodyWanted ? .needsBody : .noToken
    }

    private func invalid(_ description: String, reason: String) -> GatewayAnswer {
        .invalidRequest(description, realm: self.realm, reason: reason)
    }
}

// MARK: The individual places a token can be.

extension TokenExtractor {
    enum BearerParse: Equatable {
        case notBearer
        case malformed
        case token(Substring)
    }

    /// RFC 6750 §2.1: `Bearer` (any case), one or more spaces, then a b64token. Another scheme (Basic,
    /// say) is not ours and counts as no token here.
    static func bearerToken(_ value: String) -> BearerParse {
        var value = value
        value.makeContiguousUTF8()  // A no-op for native strings (all of them on Linux); the scan needs it.
        // On the UTF-8 bytes (every request with a header token runs this): offsets, not String indices.
        // The token's byte range, `nil` when malformed, an empty range at 0 when not a bearer credential.
        let scanned = value.utf8.withContiguousStorageIfAvailable { bytes -> Range<Int>? in
            let scheme: StaticString = "bearer"
            let schemeLength = scheme.utf8CodeUnitCount
            guard bytes.count >= schemeLength else { return 0..<0 }
            for offset in 0..<schemeLength where bytes[offset] | 0x20 != scheme.utf8Start[offset] {
                return 0..<0
            }
            if schemeLength == bytes.count { return nil }
            guard bytes[schemeLength] == UInt8(ascii: " ") else { return 0..<0 }
            var start = schemeLength
            var end = bytes.count
            while start < end, bytes[start] == UInt8(ascii: " ") || bytes[start] == UInt8(ascii: "\t") { start += 1 }
            while end > start, bytes[end - 1] == UInt8(ascii: " ") || bytes[end - 1] == UInt8(ascii: "\t") { end -= 1 }
            guard end > start else { return nil }
            for offset in start..<end where !Self.isB64TokenByte(bytes[offset]) { return nil }
            return start..<end
        }
        guard let scanned else { preconditionFailure("a contiguous UTF-8 string has contiguous storage") }
        guard let range = scanned else { return .malformed }
        guard !range.isEmpty else { return .notBearer }
        // Every byte of the token is ASCII, so these offsets are on scalar boundaries.
        let utf8 = value.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
        let upper = utf8.index(lower, offsetBy: range.count)
        return .token(value[lower..<upper])
    }

    private static func isB64TokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"),
            UInt8(ascii: "/"), UInt8(ascii: "="):
            true
        default:
            false
        }
    }

    /// A token in the URL query: a parameter with a token name, or any value shaped like a JWT
    /// (`eyJ…` header, three dot-separated parts), whatever its name.
    func queryCarriesToken(_ uri: String) -> Bool {
        guard let question = uri.utf8.firstIndex(of: UInt8(ascii: "?")) else { return false }
        var query = Array(uri.utf8[uri.utf8.index(after: question)...])
        if let hash = query.firstIndex(of: UInt8(ascii: "#")) { query.removeSubrange(hash...) }
        for pair in FormURLEncoded.pairs(query) {
            if self.queryTokenNames.contains(pair.name.lowercased()) { return true }
            if let value = FormURLEncoded.decode(pair.rawValue), Self.looksLikeJWT(value) { return true }
        }
        return false
    }

    static func looksLikeJWT(_ value: String) -> Bool {
        let trimmed = value.hasPrefix("Bearer ") ? String(value.dropFirst(7)) : value
        return trimmed.hasPrefix("eyJ") && trimmed.utf8.lazy.filter { $0 == UInt8(ascii: ".") }.count == 2
    }

    /// POST, PUT, PATCH and DELETE (and any method that is not safe by RFC 9110 §9.2.1).
    static func isUnsafe(_ method: HTTPMethod) -> Bool {
        switch method {
        case .GET, .HEAD, .OPTIONS, .TRACE: false
        default: true
        }
    }

    /// The browser says the request comes from this site: `Sec-Fetch-Site: same-origin|none`, or
    /// an `Origin` whose host (and port) is this request's `Host`. With neither header there is no proof,
    /// and a cookie is never counted without proof (fail closed).
    static func isSameSite(_ headers: HTTPHeaders) -> Bool {
        if let site = headers.first(name: "sec-fetch-site")?.lowercased() {
            // `same-site` is not enough: a sibling subdomain (user content, a taken-over host) is same-site.
            return site == "same-origin" || site == "none"
        }
        guard let origin = headers.first(name: "origin"), let host = headers.first(name: "host") else {
            return false
        }
        guard origin.lowercased().hasPrefix("https://") else { return false }
        let originHost = origin.dropFirst("https://".count)
        return originHost.lowercased() == host.lowercased()
            || originHost.lowercased() + ":443" == host.lowercased()
            || originHost.lowercased() == host.lowercased() + ":443"
    }

    static func hasBody(_ headers: HTTPHeaders) -> Bool {
        if headers.contains(name: "transfer-encoding") { return true }
        if let length = headers.first(name: "content-length"), let value = Int(length) { return value > 0 }
        return false
    }

    /// The media type of `Content-Type`, lowercased, without parameters.
    static func contentType(_ headers: HTTPHeaders) -> String? {
        guard let value = headers.first(name: "content-type") else { return nil }
        let mediaType = value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingOWS() } ?? ""
        return mediaType.lowercased()
    }

    enum JSONToken: Equatable {
        case absent
        /// Not exactly one JSON object, or the field's value is not a string.
        case invalid
        /// The field is named more than once: which value a parser keeps is unspecified, and the backend's
        /// may keep the other, so neither is believed.
        case repeated
        case value(String)
    }

    /// The string value of the top-level member `field` of a JSON object body, found by the same strict scan
    /// the body is later stripped with (``JSONTopLevelMembers``).
    static func jsonToken(_ field: String, in body: [UInt8]) -> JSONToken {
        guard let object = try? JSONTopLevelMembers(parsing: body, keepingMembersNamed: field) else { return .invalid }
        guard let member = object.members.first else { return .absent }
        guard object.members.count == 1 else { return .repeated }
        guard let value = object.stringValue(of: member) else { return .invalid }
        return .value(value)
    }
}
