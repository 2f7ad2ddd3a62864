//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateSessionCookies
import TokengateTokens

extension GatewayRuntime {
    /// One verifier per `issuers:` item with `kind: session_cookie`, by name: the site's secrets read and the
    /// keys derived here, once per load (Rails' PBKDF2 included), never per request. A reload reads the secrets
    /// again, so a rotated secret takes effect with it. Errors name the issuer and the file or variable, never a
    /// byte of a secret.
    static func sessionCookieVerifiers(_ configuration: GatewayConfiguration) throws -> [String: SessionCookieVerifier] {
        var verifiers: [String: SessionCookieVerifier] = [:]
        for (name, issuer) in configuration.sessionCookieIssuers {
            do throws(SessionCookieKeyError) {
                let secrets = try ([issuer.secret] + issuer.previousSecrets).map {
                    source throws(SessionCookieKeyError) in
                    switch source {
                    case .file(let path): try SessionCookieSecret.file(path.path)
                    case .environment(let variable): try SessionCookieSecret.environment(variable)
                    }
                }
                let maxAge = issuer.sessionMaxAge ?? configuration.tokens.sessionMaxAge
                verifiers[name] = try SessionCookieVerifier(
                    format: Self.sessionCookieFormat(issuer),
                    secrets: secrets,
                    fields: try Self.sessionCookieFields(issuer.fields),
                    policy: SessionCookiePolicy(
                        sessionMaxAge: Int64(maxAge.components.seconds),
                        clockSkew: Int64(configuration.tokens.clockSkew.components.seconds)))
            } catch {
                throw GatewayStartupError("issuers: \(name): \(error.message)")
            }
        }
        return verifiers
    }

    /// The writer of issuer `name`'s format for a token page with `mint: name`: the same secrets (the current one
    /// signs) and fields as its verifier, keys derived once per load.
    static func sessionCookieMinter(_ name: String, configuration: GatewayConfiguration) throws -> SessionCookieMinter {
        guard let issuer = configuration.sessionCookieIssuers[name] else {
            throw GatewayStartupError("mint: \(name) is not an issuers: item of kind session_cookie")
        }
        do throws(SessionCookieKeyError) {
            let secret: SessionCookieSecret
            switch issuer.secret {
            case .file(let path): secret = try SessionCookieSecret.file(path.path)
            case .environment(let variable): secret = try SessionCookieSecret.environment(variable)
            }
            return try SessionCookieMinter(
                format: Self.sessionCookieFormat(issuer), secrets: [secret], fields: try Self.sessionCookieFields(issuer.fields))
        } catch {
            throw GatewayStartupError("issuers: \(name): \(error.message)")
        }
    }

    /// The configuration's words in the format's terms; the framework's defaults where the site kept them.
    static func sessionCookieFormat(_ issuer: SessionCookieIssuerConfiguration) -> SessionCookieFormat {
        let digest = issuer.digest.flatMap { SessionCookieDigest(rawValue: $0.rawValue) }
        switch issuer.format {
        case .rails:
            let rails = issuer.rails ?? SessionCookieIssuerConfiguration.Rails(version: .v7_1)
            return .rails(
                RailsCookieOptions(
                    version: RailsCookieOptions.Version(rawValue: rails.version.rawValue) ?? .v7_1,
                    cookieName: issuer.cookieName,
                    protection: rails.protection == .signed ? .signed : .encrypted,
                    keyDerivationDigest: rails.keyDerivationDigest.flatMap { SessionCookieDigest(rawValue: $0.rawValue) },
                    iterations: rails.iterations,
                    signedCookieDigest: SessionCookieDigest(rawValue: rails.signedCookieDigest.rawValue) ?? .sha1))
        case .flask:
            var options = FlaskSessionOptions()
            if let salt = issuer.salt { options.salt = salt }
            if let derivation = issuer.flaskKeyDerivation.flatMap({
                FlaskSessionOptions.KeyDerivation(rawValue: $0.rawValue)
            }) {
                options.keyDerivation = derivation
            }
            if let digest { options.digest = digest }
            if let maxAge = issuer.formatMaxAge { options.maxAge = Int64(maxAge.components.seconds) }
            return .flask(options)
        case .django:
            var options = DjangoSessionOptions()
            if let salt = issuer.salt { options.salt = salt }
            if let digest { options.digest = digest }
            if let maxAge = issuer.formatMaxAge { options.maxAge = Int64(maxAge.components.seconds) }
            return .django(options)
        case .cookieSession:
            return .cookieSession(CookieSessionOptions(cookieName: issuer.cookieName, digest: digest ?? .sha1))
        }
    }

    /// A `mint_whoami` or `mint_set` member's JSON Pointer.
    static func sessionPointer(_ text: String) throws -> SessionJSONPointer {
        guard let pointer = SessionJSONPointer(text) else {
            throw GatewayStartupError("token page mint_whoami/mint_set: \(text) is not a JSON Pointer")
        }
        return pointer
    }

    /// The fields' JSON Pointers (checked by the configuration decoder already).
    static func sessionCookieFields(_ fields: SessionCookieIssuerConfiguration.Fields) throws(SessionCookieKeyError)
        -> SessionCookieFields
    {
        func pointer(_ text: String) throws(SessionCookieKeyError) -> SessionJSONPointer {
            guard let pointer = SessionJSONPointer(text) else {
                throw SessionCookieKeyError.invalidOption("\(text) is not a JSON Pointer")
            }
            return pointer
        }
        return SessionCookieFields(
            userID: try pointer(fields.userID),
            loginTime: try pointer(fields.loginTime),
            apiOnly: try fields.apiOnly.map { text throws(SessionCookieKeyError) in try pointer(text) },
            userIDType: fields.userIDType == .integer ? .integer : .string)
    }
}
