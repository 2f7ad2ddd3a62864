//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// One `kind: session_cookie` issuer's block, as each item of an `issuers:` list is read.
@Suite struct SessionCookieIssuerTests {
    func issuer(_ yaml: String) throws -> SessionCookieIssuerConfiguration {
        try SessionCookieIssuerConfiguration(yaml: yaml, sourcePath: "/etc/tokengate/test.yaml", checkFiles: false)
    }

    func error(_ yaml: String) -> ConfigurationError? {
        do {
            _ = try self.issuer(yaml)
            return nil
        } catch let error as ConfigurationError {
            return error
        } catch {
            Issue.record("unexpected error \(error)")
            return nil
        }
    }

    @Test func railsIssuer() throws {
        let issuer = try self.issuer(
            """
            kind: session_cookie
            format: rails
            version: "7.0"
            secret_file: secrets/secret_key_base
            cookie: _shop_session
            fields: { user_id: /warden.user.user.key/0/0, login_time: /login_at, api_only: /api_only, user_id_type: integer }
            session_max_age: 7d
            """)
        #expect(issuer.format == .rails)
        #expect(issuer.secret == .file(ConfigPath(path: "/etc/tokengate/secrets/secret_key_base", original: "secrets/secret_key_base")))
        #expect(issuer.cookieName == "_shop_session")
        #expect(issuer.fields.userID == "/warden.user.user.key/0/0")
        #expect(issuer.fields.userIDType == .integer)
        #expect(issuer.rails == SessionCookieIssuerConfiguration.Rails(version: .v7_0))
        #expect(issuer.sessionMaxAge == .seconds(7 * 86_400))
        #expect(issuer.signatureCookieName == nil)
    }

    @Test func defaultsOfTheOtherFormats() throws {
        let flask = try self.issuer(
            "{ format: flask, secret_env: FLASK_SECRET_KEY, fields: { user_id: /_user_id, login_time: /login_at }, max_age: 31d }")
        #expect(flask.cookieName == "session")
        #expect(flask.secret == .environment("FLASK_SECRET_KEY"))
        #expect(flask.formatMaxAge == .seconds(31 * 86_400))
        let django = try self.issuer(
            "{ format: django, secret_env: DJANGO_SECRET_KEY, fields: { user_id: /_auth_user_id, login_time: /login_at } }")
        #expect(django.cookieName == "sessionid")
        #expect(django.digest == nil)
        let express = try self.issuer(
            "{ format: cookie_session, secret_file: k, digest: SHA256, fields: { user_id: /passport/user, login_time: /login_at } }")
        #expect(express.signatureCookieName == "session.sig")
        #expect(express.digest == .sha256)
    }

    @Test func refusals() {
        let fields = "fields: { user_id: /u, login_time: /t }"
        let cases: [(String, ConfigurationError.Code, String)] = [
            ("{ format: rails, version: '7.0', secret_env: S, \(fields) }", .missingKey, "cookie"),
            ("{ format: rails, cookie: _s, secret_env: S, \(fields) }", .missingKey, "version"),
            ("{ format: flask, \(fields) }", .missingKey, "secret_file or secret_env"),
            ("{ format: flask, secret_file: a, secret_env: B, \(fields) }", .conflict, "not both"),
            ("{ format: flask, secret_env: 'not a name!', \(fields) }", .invalidValue, "environment variable"),
            ("{ format: flask, secret_env: S, fields: { user_id: /u } }", .missingKey, "login_time"),
            ("{ format: flask, secret_env: S, fields: { user_id: u, login_time: /t } }", .invalidValue, "JSON Pointer"),
            ("{ format: flask, secret_env: S, fields: { user_id: /a~2, login_time: /t } }", .invalidValue, "JSON Pointer"),
            ("{ format: flask, secret_env: S, fields: { user_id: //, login_time: /t } }", .invalidValue, "JSON Pointer"),
            ("{ format: flask, secret_env: S, fields: { user_id: /t, login_time: /t } }", .duplicate, "different"),
            ("{ format: flask, secret_env: S, version: '6.1', \(fields) }", .conflict, "setting of rails"),
            ("{ format: rails, version: '6.1', cookie: _s, secret_env: S, digest: SHA1, \(fields) }", .conflict, "not of rails"),
            ("{ format: cookie_session, secret_env: S, max_age: 1d, \(fields) }", .conflict, "max_age"),
            ("{ format: rails, version: '6.1', cookie: _s, secret_env: S, signed_cookie_digest: SHA256, \(fields) }", .conflict, "protection: signed"),
            ("{ format: rails, version: '8.5', cookie: _s, secret_env: S, \(fields) }", .invalidValue, "6.1"),
            ("{ format: flask, cookie: 'a b', secret_env: S, \(fields) }", .invalidValue, "cookie name"),
            ("{ format: sinatra, secret_env: S, \(fields) }", .invalidValue, "rails"),
            ("{ kind: jwt, format: flask, secret_env: S, \(fields) }", .invalidValue, "session_cookie"),
            ("{ format: flask, secret_env: S, \(fields), max_age: 5s }", .invalidValue, "must be from"),
            ("{ format: flask, secret_env: S, \(fields), secret: hunter2 }", .unknownKey, "secret"),
        ]
        for (yaml, code, fragment) in cases {
            let error = self.error(yaml)
            #expect(error?.code == code, "\(yaml): \(String(describing: error))")
            #expect(error?.message.contains(fragment) == true, "\(yaml): \(String(describing: error?.message))")
        }
    }

    @Test func filesAndVariablesAreCheckedWhenAsked() throws {
        let yaml = "{ format: django, secret_env: TOKENGATE_TEST_UNSET_SESSION_SECRET, fields: { user_id: /u, login_time: /t } }"
        let missing = #expect(throws: ConfigurationError.self) {
            _ = try SessionCookieIssuerConfiguration(yaml: yaml, sourcePath: "test.yaml", checkFiles: true)
        }
        #expect(missing?.code == .fileNotFound)
        let file = "{ format: django, secret_file: /nonexistent/secret, fields: { user_id: /u, login_time: /t } }"
        let absent = #expect(throws: ConfigurationError.self) {
            _ = try SessionCookieIssuerConfiguration(yaml: file, sourcePath: "test.yaml", checkFiles: true)
        }
        #expect(absent?.code == .fileNotFound)
    }

    @Test func aPastedSecretNeverShowsInTheMessage() {
        let secret = "4f3c2b1a09e8d7c6b5a4938271605f4e3d2c1b0a"
        let error = self.error("{ format: flask, secret_env: '\(secret)', fields: { user_id: /u, login_time: /t } }")
        #expect(error?.code == .invalidValue)
        #expect(error.map { !"\($0)".contains(secret) } == true)
    }
}
