//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

/// Finds the token of a request in the places its route lists (DESIGN §2), and refuses the shapes RFC
/// 6750 forbids: a token in the URL, tokens sent more than one way, a cookie token on a cross-site
/// unsafe request.
///
/// Pure: no I/O, no clock. The connection handler calls ``extract(method:uri:fields:body:)`` once with
/// `body: nil`; when the answer is ``Outcome/needsBody`` it reads the body (up to the route's limit) and
/// calls again with it.
package struct TokenExtractor: Sendable {
    package enum Outcome: Equatable {
        /// No token anywhere the route looks.
        case noToken
        /// The token's bytes: for a header token a slice of the request's field lines (``RequestFields/bytes``),
        /// so the token of nearly every request is verified where it lies, with no copy; a cookie or body token's
        /// own bytes.
        case token(ArraySlice<UInt8>, TokenSource)
        /// A body source applies to this request (a form or JSON body on a route that reads one).
        case needsBody
        case answer(GatewayAnswer)
    }

    package let sources: [TokenSource]
    package let realm: String
    /// Query parameter names that betray a token in the URL: `access_token` (RFC 6750 §2.3) and the
    /// names of the route's own cookie, form and JSON sources.
    private let queryTokenNames: Set<String>
    /// The origins of the route's CORS policy with credentials (lower-cased): a cookie token from a page of
    /// one of them counts on an unsafe method, as one from this site does. No other site's ever does.
    private let credentialedOrigins: Set<String>

    package init(sources: [TokenSource], realm: String, credentialedOrigins: Set<String> = []) {
        self.sources = sources
        self.realm = realm
        self.credentialedOrigins = credentialedOrigins
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

    package func extract(method: HTTPMethod, uri: String, fields: RequestFields, body: [UInt8]?) -> Outcome {
        if self.queryCarriesToken(uri) || Self.pathCarriesToken(uri) {
            return .answer(
                .invalidRequest("tokens must not be sent in the URL", realm: self.realm, reason: "token_in_url")
            )
        }
        // The first token found and how many there were: more than one is refused, so one is all that is kept.
        var found: (ArraySlice<UInt8>, TokenSource)?
        var foundCount = 0
        func record(_ token: ArraySlice<UInt8>, _ source: TokenSource) {
            foundCount += 1
            if found == nil { found = (token, source) }
        }
        var bodyWanted = false
        for source in self.sources {
            switch source {
            case .authorization:
                guard let (range, count) = fields.firstValueRange(name: "authorization") else { continue }
                if count > 1 {
                    return .answer(self.invalid("more than one Authorization header", reason: "multiple_tokens"))
                }
                let parse = fields.bytes.withUnsafeBytes { Self.bearerToken(UnsafeRawBufferPointer(rebasing: $0[range])) }
                switch parse {
                case .notBearer: continue
                case .malformed:
                    return .answer(self.invalid("malformed Bearer credentials", reason: "malformed_authorization"))
                case .token(let token):
                    record(fields.bytes[range.lowerBound + token.lowerBound..<range.lowerBound + token.upperBound], source)
                }
            case .header(let name):
                var name = name
                let ranges = name.withUTF8 { fields.valueRanges(name: UnsafeRawBufferPointer($0)) }
                if ranges.count > 1 {
                    return .answer(self.invalid("more than one token header", reason: "multiple_tokens"))
                }
                // Values are kept without the whitespace around them.
                guard let range = ranges.first, !range.isEmpty else { continue }
                record(fields.bytes[range], source)
            case .cookie(let name):
                let values = CookieHeader.values(named: name, in: fields.values(name: "cookie"))
                if values.count > 1 {
                    return .answer(self.invalid("more than one token cookie", reason: "multiple_tokens"))
                }
                guard let value = values.first, !value.isEmpty else { continue }
                if Self.isUnsafe(method), !Self.isSameSite(fields), !self.isCredentialedOrigin(fields) {
                    return .answer(.crossSiteCookie(realm: self.realm))
                }
                record(ArraySlice(value.utf8), source)
            case .form(let field):
                // RFC 6750 §2.2: never with GET (nor HEAD, GET without the body); such a body is not looked at.
                guard method != .GET, method != .HEAD, Self.hasBody(fields),
                    Self.contentType(fields) == "application/x-www-form-urlencoded"
                else {
                    continue
                }
                guard let body else {
                    bodyWanted = true
                    continue
                }
                let values = FormURLEncoded.values(named: field, in: body)
                if FormURLEncoded.hasSemicolonField(named: field, in: body) {
                    return .answer(self.invalid("the token field follows a ';' in the body", reason: "malformed_body"))
                }
                if values.count > 1 {
                    return .answer(self.invalid("more than one token field in the body", reason: "multiple_tokens"))
                }
                guard let first = values.first else { continue }
                guard let value = first else {
                    return .answer(self.invalid("the token field is not valid form encoding", reason: "malformed_body"))
                }
                if !value.isEmpty { record(ArraySlice(value.utf8), source) }
            case .json(let field):
                guard Self.hasBody(fields), Self.contentType(fields) == "application/json" else { continue }
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
                    if !value.isEmpty { record(ArraySlice(value.utf8), source) }
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
    package enum BearerParse: Equatable {
        case notBearer
        case malformed
        /// Where the token lies in the value.
        case token(Range<Int>)
    }

    /// RFC 6750 §2.1: `Bearer` (any case), one or more spaces, then a b64token. Another scheme (Basic,
    /// say) is not ours and counts as no token here. On the value's bytes: every request with a header token
    /// runs this.
    package static func bearerToken(_ value: UnsafeRawBufferPointer) -> BearerParse {
        let scheme: StaticString = "bearer"
        let schemeLength = scheme.utf8CodeUnitCount
        guard value.count >= schemeLength else { return .notBearer }
        for offset in 0..<schemeLength where value[offset] | 0x20 != scheme.utf8Start[offset] {
            return .notBearer
        }
        if schemeLength == value.count { return .malformed }
        guard value[schemeLength] == UInt8(ascii: " ") else { return .notBearer }
        var start = schemeLength
        var end = value.count
        while start < end, value[start] == UInt8(ascii: " ") || value[start] == UInt8(ascii: "\t") { start += 1 }
        while end > start, value[end - 1] == UInt8(ascii: " ") || value[end - 1] == UInt8(ascii: "\t") { end -= 1 }
        guard end > start else { return .malformed }
        // One table load per byte and no exit per byte: the token is the longest value of nearly every request.
        let bad = Self.nonB64TokenBytes.withUnsafeBufferPointer { table in
            var bad: UInt8 = 0
            for offset in start..<end {
                bad |= table[Int(value[offset])]
            }
            return bad
        }
        return bad == 0 ? .token(start..<end) : .malformed
    }

    /// 1 for the bytes ``isB64TokenByte(_:)`` refuses, 0 for the others, by byte value.
    private static let nonB64TokenBytes: [UInt8] = (0...255).map { Self.isB64TokenByte(UInt8($0)) ? 0 : 1 }

    /// `ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" / "="` (RFC 6750 §2.1).
    package static func isB64TokenByte(_ byte: UInt8) -> Bool {
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

    /// A token in the URL query: a parameter with a token name, or anything shaped like a JWT (``JWTShape``) in
    /// a name or a value, as sent or percent-encoded, whatever precedes it (`?x=1;access_token=<token>`,
    /// `?<token>`, `?x=%65yJ…`).
    package func queryCarriesToken(_ uri: String) -> Bool {
        guard let question = uri.utf8.firstIndex(of: UInt8(ascii: "?")) else { return false }
        var query = Array(uri.utf8[uri.utf8.index(after: question)...])
        if let hash = query.firstIndex(of: UInt8(ascii: "#")) { query.removeSubrange(hash...) }
        if query.withUnsafeBufferPointer({ JWTShape.isPresent(inURLPart: $0) }) { return true }
        return FormURLEncoded.pairs(query).contains { self.queryTokenNames.contains($0.name.lowercased()) }
    }

    /// Something shaped like a JWT anywhere in the target, path or query, as sent or percent-encoded: for routes
    /// without token sources of their own (the token page), which must not copy a token into a redirect.
    package static func targetCarriesJWT(_ uri: String) -> Bool {
        var uri = uri
        return uri.withUTF8 { JWTShape.isPresent(inURLPart: $0) }
    }

    /// Something shaped like a JWT anywhere in the path, as sent or percent-encoded (``JWTShape``):
    /// `/api/<token>`, `/api/x=%65yJ…`.
    package static func pathCarriesToken(_ uri: String) -> Bool {
        var uri = uri
        return uri.withUTF8 { target in
            let pathEnd = target.firstIndex(of: UInt8(ascii: "?")) ?? target.count
            return JWTShape.isPresent(inURLPart: UnsafeBufferPointer(rebasing: target[..<pathEnd]))
        }
    }

    /// The request carries one `Origin`, and it is one the route's CORS policy allows with credentials.
    private func isCredentialedOrigin(_ fields: RequestFields) -> Bool {
        guard !self.credentialedOrigins.isEmpty else { return false }
        let origins = fields.values(name: "origin")
        guard origins.count == 1 else { return false }
        return self.credentialedOrigins.contains(origins[0].lowercased())
    }

    /// POST, PUT, PATCH and DELETE (and any method that is not safe by RFC 9110 §9.2.1).
    package static func isUnsafe(_ method: HTTPMethod) -> Bool {
        switch method {
        case .GET, .HEAD, .OPTIONS, .TRACE: false
        default: true
        }
    }

    /// The browser says the request comes from this site: `Sec-Fetch-Site: same-origin|none`, or
    /// an `Origin` whose host (and port) is this request's `Host`. With neither header there is no proof,
    /// and a cookie is never counted without proof (fail closed).
    package static func isSameSite(_ fields: RequestFields) -> Bool {
        if let site = fields.first(name: "sec-fetch-site")?.lowercased() {
            // `same-site` is not enough: a sibling subdomain (user content, a taken-over host) is same-site.
            return site == "same-origin" || site == "none"
        }
        guard let origin = fields.first(name: "origin"), let host = fields.first(name: "host") else {
            return false
        }
        guard origin.lowercased().hasPrefix("https://") else { return false }
        let originHost = origin.dropFirst("https://".count)
        return originHost.lowercased() == host.lowercased()
            || originHost.lowercased() + ":443" == host.lowercased()
            || originHost.lowercased() == host.lowercased() + ":443"
    }

    /// The browser says another site's page made this request as a subresource — a script's `fetch`, an
    /// image, a frame — rather than a top-level navigation (Fetch Metadata: `Sec-Fetch-Site: cross-site` and not
    /// `Sec-Fetch-Mode: navigate` with `Sec-Fetch-Dest: document`). The token page mints a token and sets its
    /// cookie for whoever's browser asks, so another site must not make it do so silently in the background.
    /// Navigations stay allowed: a federated login's redirect chain back to the page is cross-site. Without
    /// the headers (apps, web views, older browsers) there is nothing to judge and nothing is refused.
    package static func isCrossSiteSubresource(_ fields: RequestFields) -> Bool {
        guard let site = fields.first(name: "sec-fetch-site"), site.lowercased() == "cross-site" else { return false }
        let mode = fields.first(name: "sec-fetch-mode")?.lowercased()
        let destination = fields.first(name: "sec-fetch-dest")?.lowercased()
        return !(mode == "navigate" && (destination == nil || destination == "document"))
    }

    /// The request says a body follows: chunked, or a length above zero.
    package static func hasBody(_ fields: RequestFields) -> Bool {
        var chunked = false
        var length: Int?
        fields.forEach { name, value in
            if FieldBytes.equalsIgnoringCase(name, "transfer-encoding") {
                chunked = true
            } else if length == nil, FieldBytes.equalsIgnoringCase(name, "content-length") {
                length = FieldBytes.decimal(value) ?? 0
            }
        }
        return chunked || (length ?? 0) > 0
    }

    /// The media type of `Content-Type`, lowercased, without parameters.
    package static func contentType(_ fields: RequestFields) -> String? {
        guard let value = fields.first(name: "content-type") else { return nil }
        let mediaType = value.split(separator: ";", maxSplits: 1).first.map { $0.trimmingOWS() } ?? ""
        return mediaType.lowercased()
    }

    package enum JSONToken: Equatable {
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
    package static func jsonToken(_ field: String, in body: [UInt8]) -> JSONToken {
        guard let object = try? JSONTopLevelMembers(parsing: body, keepingMembersNamed: field) else { return .invalid }
        guard let member = object.members.first else { return .absent }
        guard object.members.count == 1 else { return .repeated }
        guard let value = object.stringValue(of: member) else { return .invalid }
        return .value(value)
    }
}
