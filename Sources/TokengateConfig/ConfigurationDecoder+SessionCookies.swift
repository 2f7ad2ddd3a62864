//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Yams

// MARK: Session-cookie issuers

extension ConfigurationDecoder {
    static let sessionCookieIssuerKeys = [
        "name", "kind", "format", "secret_file", "secret_env", "previous_secret_files", "cookie", "fields", "max_age",
        "session_max_age", "version", "protection", "key_derivation_digest", "iterations", "signed_cookie_digest",
        "salt", "key_derivation", "digest",
    ]

    /// The top-level `issuers:` list: each item names an issuer (`name:`, which routes refer to) and its kind:
    /// `session_cookie`, a web framework's own login cookie checked with the site's secret, or `jwt`, tokens of
    /// another issuer (an identity provider) with keys and settings of its own.
    func issuers(_ node: ConfigNode) throws(ConfigurationError) -> IssuerSection {
        var section = IssuerSection()
        for item in try node.sequence(maximumCount: 64) {
            let map = try item.anyMapping()
            let nameNode = try map.required("name")
            let name = try nameNode.string(maximumLength: 64)
            guard Self.isIssuerName(name) else {
                throw nameNode.error(.invalidValue, "expected a name of letters, digits, - and _, got \(nameNode.summary)")
            }
            guard name != JWTIssuerConfiguration.topLevelName else {
                throw nameNode.error(
                    .conflict, "\(name) is the name of the issuer made of the top-level keys and tokens")
            }
            guard section.nodes[name] == nil else { throw nameNode.error(.duplicate, "another issuer is named \(name)") }
            guard let kindNode = map["kind"] else {
                throw item.error(.missingKey, "an issuer needs kind: session_cookie or kind: jwt")
            }
            switch try kindNode.string(maximumLength: 64) {
            case "jwt":
                section.jwt[name] = try self.jwtIssuer(item, name: name)
                section.jwtOrder.append(name)
            case "session_cookie":
                section.sessionCookie[name] = try self.sessionCookieIssuer(item)
            default:
                throw kindNode.error(.invalidValue, "expected session_cookie or jwt, got \(kindNode.summary)")
            }
            section.nodes[name] = item
        }
        return section
    }

    /// 1 to 64 of `A-Z a-z 0-9 - _`: the name appears in routes, logs and metrics.
    static func isIssuerName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default:
                    false
                }
            }
    }

    /// A route's `session_cookie:`: an issuer's name, or `{ issuer: NAME, sources: [cookie:NAME, header:NAME] }`.
    /// The sources default to the issuer's own cookie. Tokens found there are read as that site's login cookie;
    /// tokens found in the route's other sources stay JWTs.
    func routeSessionCookie(_ node: ConfigNode, issuers: [String: SessionCookieIssuerConfiguration]?)
        throws(ConfigurationError) -> RouteSessionCookie
    {
        let nameNode: ConfigNode
        var sourcesNode: ConfigNode?
        if node.isScalar {
            nameNode = node
        } else {
            let map = try node.mapping(allowed: ["issuer", "sources"])
            nameNode = try map.required("issuer")
            sourcesNode = map["sources"]
        }
        let name = try nameNode.string(maximumLength: 64)
        // `issuers` is nil when that section has a problem of its own: the name cannot be judged then.
        guard let issuers else { return RouteSessionCookie(issuer: name, sources: []) }
        guard let issuer = issuers[name] else {
            let names = issuers.keys.sorted()
            var message = "unknown issuer '\(name)'"
            if let suggestion = ValueSyntax.suggestion(for: name, among: names) {
                message += ", did you mean '\(suggestion)'?"
            } else {
                message += names.isEmpty ? " (no issuers are defined)" : " (defined: \(names.joined(separator: ", ")))"
            }
            throw nameNode.error(.unknownReference, message)
        }
        guard let sourcesNode else {
            return RouteSessionCookie(issuer: name, sources: [.cookie(issuer.cookieName)])
        }
        let sources = try self.sources(sourcesNode)
        for (index, source) in sources.enumerated() {
            switch source {
            case .cookie:
                continue
            case .header where issuer.format == .cookieSession:
                throw try sourcesNode.sequence()[index].error(
                    .conflict,
                    "a cookie_session cookie comes with its signature cookie (\(issuer.cookieName).sig), which a "
                        + "header cannot carry: read it from cookie:\(issuer.cookieName)")
            case .header:
                continue
            case .authorization, .form, .json:
                throw try sourcesNode.sequence()[index].error(
                    .invalidValue, "a site's login cookie is read from cookie:NAME or header:NAME, not \(source)")
            }
        }
        return RouteSessionCookie(issuer: name, sources: sources)
    }

    /// One `kind: session_cookie` issuer (an item of the `issuers:` list; `kind` may be left out here).
    func sessionCookieIssuer(_ node: ConfigNode) throws(ConfigurationError) -> SessionCookieIssuerConfiguration {
        typealias Issuer = SessionCookieIssuerConfiguration
        let map = try node.mapping(allowed: Self.sessionCookieIssuerKeys)
        if let kindNode = map["kind"] {
            guard try kindNode.string(maximumLength: 64) == "session_cookie" else {
                throw kindNode.error(.invalidValue, "a session-cookie issuer has kind: session_cookie")
            }
        }
        let format = try map.required("format").choice(Issuer.Format.self)

        // Keys that belong to other formats are refused by name, so a typo in the format shows.
        let owners: [(String, [Issuer.Format])] = [
            ("version", [.rails]), ("protection", [.rails]), ("key_derivation_digest", [.rails]),
            ("iterations", [.rails]), ("signed_cookie_digest", [.rails]), ("salt", [.flask, .django]),
            ("key_derivation", [.flask]), ("digest", [.flask, .django, .cookieSession]),
            ("max_age", [.flask, .django]),
        ]
        for (key, formats) in owners where map.has(key) && !formats.contains(format) {
            throw map.keyNode(key).error(
                .conflict,
                "\(key) is a setting of \(formats.map(\.rawValue).joined(separator: " and ")), not of \(format.rawValue)"
            )
        }

        let secret = try self.sessionCookieSecret(map, item: node)
        var previous: [Issuer.SecretSource] = []
        if let previousNode = map["previous_secret_files"] {
            for item in try previousNode.sequence(maximumCount: 15) {
                previous.append(.file(try item.path(mustExist: true)))
            }
        }

        let cookieName: String
        if let cookieNode = map["cookie"] {
            cookieName = try cookieNode.string(maximumLength: 128)
            guard Self.isCookieName(cookieName) else {
                throw cookieNode.error(.invalidValue, "expected a cookie name (letters, digits and !#$%&'*+-.^_`|~)")
            }
        } else {
            switch format {
            case .flask, .cookieSession: cookieName = "session"
            case .django: cookieName = "sessionid"
            case .rails:
                throw node.error(
                    .missingKey,
                    "a rails issuer needs cookie: the session cookie's name (config.session_store key:, e.g. _app_session)"
                )
            }
        }

        let fields = try self.sessionCookieFields(try map.required("fields"))

        var rails: Issuer.Rails?
        if format == .rails {
            rails = Issuer.Rails(
                version: try map.required("version").choice(Issuer.Rails.Version.self),
                protection: try map["protection"]?.choice(Issuer.Rails.Protection.self) ?? .encrypted,
                keyDerivationDigest: try map["key_derivation_digest"]?.choice(Issuer.Digest.self),
                iterations: try map["iterations"]?.int(in: 1...10_000_000) ?? 1000,
                signedCookieDigest: try map["signed_cookie_digest"]?.choice(Issuer.Digest.self) ?? .sha1
            )
            if rails?.protection == .encrypted, let digestNode = map["signed_cookie_digest"] {
                throw digestNode.error(.conflict, "signed_cookie_digest is for protection: signed")
            }
        }
        let lifetimes = Duration.seconds(60)...Duration.seconds(366 * 86_400)
        return Issuer(
            format: format,
            secret: secret,
            previousSecrets: previous,
            cookieName: cookieName,
            fields: fields,
            formatMaxAge: try map["max_age"]?.duration(in: lifetimes),
            sessionMaxAge: try map["session_max_age"]?.duration(in: lifetimes),
            rails: rails,
            salt: try map["salt"]?.string(maximumLength: 256),
            flaskKeyDerivation: try map["key_derivation"]?.choice(Issuer.FlaskKeyDerivation.self),
            digest: try map["digest"]?.choice(Issuer.Digest.self)
        )
    }

    /// Exactly one of `secret_file` and `secret_env`. Neither message repeats a value: someone who pasted the
    /// secret itself must not find it in a log.
    private func sessionCookieSecret(_ map: ConfigMapping, item: ConfigNode) throws(ConfigurationError)
        -> SessionCookieIssuerConfiguration.SecretSource
    {
        switch (map["secret_file"], map["secret_env"]) {
        case (.some, .some):
            throw map.keyNode("secret_env").error(.conflict, "an issuer has secret_file or secret_env, not both")
        case (nil, nil):
            throw item.error(
                .missingKey, "a session-cookie issuer needs the site's secret: secret_file or secret_env")
        case (.some(let fileNode), nil):
            return .file(try fileNode.path(mustExist: true))
        case (nil, .some(let envNode)):
            let name = try envNode.string(maximumLength: 128)
            guard ValueSyntax.isEnvironmentName(name) else {
                throw envNode.error(
                    .invalidValue, "expected the name of an environment variable (letters, digits, _), not its value")
            }
            if envNode.context.checkFiles, getenv(name) == nil {
                throw envNode.error(.fileNotFound, "the environment variable named here is not set")
            }
            return .environment(name)
        }
    }

    /// `fields: { user_id: POINTER, login_time: POINTER, api_only: POINTER, user_id_type: string|integer }`.
    private func sessionCookieFields(_ node: ConfigNode) throws(ConfigurationError)
        -> SessionCookieIssuerConfiguration.Fields
    {
        let map = try node.mapping(allowed: ["user_id", "login_time", "api_only", "user_id_type"])
        guard map.has("login_time") else {
            // Why it is required for every format: the frameworks' own times are renewed when a session is saved
            // (Flask, Django) or are only an expiry (Rails), or are absent (cookie-session).
            throw node.error(
                .missingKey,
                "fields needs login_time: where the site stores the login time (the framework's own time is renewed "
                    + "on every save, or is only an expiry, so a cutoff cannot be compared with it)"
            )
        }
        let userID = try self.jsonPointer(try map.required("user_id"))
        let loginTime = try self.jsonPointer(try map.required("login_time"))
        let apiOnly = try map["api_only"].map { node throws(ConfigurationError) in try self.jsonPointer(node) }
        let pointers = [userID, loginTime] + (apiOnly.map { [$0] } ?? [])
        guard Set(pointers).count == pointers.count else {
            throw node.error(.duplicate, "user_id, login_time and api_only must be different places")
        }
        return SessionCookieIssuerConfiguration.Fields(
            userID: userID,
            loginTime: loginTime,
            apiOnly: apiOnly,
            userIDType: try map["user_id_type"]?.choice(SessionCookieIssuerConfiguration.Fields.UserIDType.self)
                ?? .string
        )
    }

    /// A JSON Pointer (RFC 6901) of 1 to 8 non-empty steps of at most 128 bytes, `~0` and `~1` the only escapes.
    private func jsonPointer(_ node: ConfigNode) throws(ConfigurationError) -> String {
        let text = try node.string(maximumLength: 1024)
        let steps = text.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
        var valid = text.hasPrefix("/") && (1...8).contains(steps.count)
        for step in steps where valid {
            var bytes = step.makeIterator()
            var length = 0
            while let byte = bytes.next() {
                length += 1
                if byte == UInt8(ascii: "~") {
                    let next = bytes.next()
                    if next != UInt8(ascii: "0") && next != UInt8(ascii: "1") { valid = false }
                }
            }
            if length == 0 || length > 128 { valid = false }
        }
        guard valid else {
            throw node.error(
                .invalidValue,
                "expected a JSON Pointer such as /_auth_user_id or /warden.user.user.key/0/0 (1 to 8 steps, ~0 and ~1 "
                    + "the only escapes), got \(node.summary)"
            )
        }
        return text
    }

    /// An RFC 6265 cookie-name (an RFC 7230 token).
    static func isCookieName(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"):
                    return true
                default:
                    return "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
    }
}

extension SessionCookieIssuerConfiguration {
    /// Reads one issuer's block on its own, as the `issuers:` list will read each of its items (tests; tools that
    /// check a block before adding it).
    init(yaml: String, sourcePath: String, checkFiles: Bool) throws {
        guard let root = try Yams.compose(yaml: yaml, .default, .default, .utf8) else {
            throw ConfigurationError(code: .empty, file: sourcePath, message: "the issuer is empty")
        }
        let context = DecodingContext(
            file: sourcePath, baseDirectory: GatewayConfiguration.baseDirectory(for: sourcePath), checkFiles: checkFiles)
        self = try ConfigurationDecoder().sessionCookieIssuer(ConfigNode(node: root, path: "issuer", context: context))
    }
}
