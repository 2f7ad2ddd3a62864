//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Benchmark
import Foundation
import TokengateSessionCookies
import TokengateTokens

/// The session-cookie formats on the same hot path as `HS256/tokengate`: SessionCookieVerifier.verify with the
/// same ~10k-user cutoff snapshot, on a cookie of each format holding what a logged-in session of that framework
/// holds (Rails' session id and CSRF token, Flask-Login's and Django's keys), minted with the format's own minter.
/// 1000 verifications per measured iteration, figures per verification, as for HS256.
func sessionCookieBenchmarks(metrics: [BenchmarkMetric]) {
    let configuration = Benchmark.Configuration(
        metrics: metrics, timeUnits: .nanoseconds, warmupIterations: 10, scalingFactor: .kilo,
        maxDuration: .seconds(2), maxIterations: 2_000)
    let now = Int64(Date().timeIntervalSince1970)
    let loginTime = now - 5
    let cutoffs = BenchFixture.makeCutoffs(issuedAt: loginTime)
    let secret: SessionCookieSecret
    do {
        secret = try SessionCookieSecret(bytes: Array(String(repeating: "bench-secret-", count: 10).utf8))
    } catch {
        fatalError("session-cookie benchmark setup failed: \(error)")
    }
    let hex64 = String(repeating: "9f3c", count: 16)
    let rows: [(String, SessionCookieFormat, SessionCookieFields, SessionJSONValue)] = [
        (
            "rails-encrypted", .rails(RailsCookieOptions(version: .v7_1, cookieName: "_app_session")),
            SessionCookieFields(userID: SessionJSONPointer("/user_id")!, loginTime: SessionJSONPointer("/login_at")!),
            .object([("session_id", .string(String(hex64.prefix(32)))), ("_csrf_token", .string(String(hex64.prefix(44))))])
        ),
        (
            "rails-signed", .rails(RailsCookieOptions(version: .v7_1, cookieName: "login", protection: .signed)),
            SessionCookieFields(userID: SessionJSONPointer("/user_id")!, loginTime: SessionJSONPointer("/login_at")!),
            .object([])
        ),
        (
            "flask", .flask(FlaskSessionOptions()),
            SessionCookieFields(userID: SessionJSONPointer("/_user_id")!, loginTime: SessionJSONPointer("/login_at")!),
            .object([("_fresh", .bool(true))])
        ),
        (
            "flask-compressed", .flask(FlaskSessionOptions()),
            SessionCookieFields(userID: SessionJSONPointer("/_user_id")!, loginTime: SessionJSONPointer("/login_at")!),
            // Flask-Login's `_id` (a 128-digit hex digest) makes itsdangerous compress the session.
            .object([("_fresh", .bool(true)), ("_id", .string(hex64 + hex64))])
        ),
        (
            "django", .django(DjangoSessionOptions()),
            SessionCookieFields(
                userID: SessionJSONPointer("/_auth_user_id")!, loginTime: SessionJSONPointer("/login_at")!),
            .object([
                ("_auth_user_backend", .string("django.contrib.auth.backends.ModelBackend")),
                ("_auth_user_hash", .string(hex64)),
            ])
        ),
        (
            "cookie-session", .cookieSession(CookieSessionOptions()),
            SessionCookieFields(userID: SessionJSONPointer("/passport/user")!, loginTime: SessionJSONPointer("/login_at")!),
            .object([])
        ),
    ]
    for (name, format, fields, base) in rows {
        let verifier: SessionCookieVerifier
        let cookie: SessionCookieMinter.Cookie
        do {
            verifier = try SessionCookieVerifier(format: format, secrets: [secret], fields: fields)
            cookie = try SessionCookieMinter(format: format, secrets: [secret], fields: fields).mint(
                userID: BenchFixture.subject, loginTime: loginTime, base: base, now: now)
        } catch {
            fatalError("session-cookie benchmark setup for \(name) failed: \(error)")
        }
        let value = cookie.value
        let signature = cookie.signature
        Benchmark("session-cookie/\(name)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(verifier.verify(value, signature: signature, accept: .session, cutoffs: cutoffs, now: now))
            }
        } setup: {
            let result = verifier.verify(value, signature: signature, accept: .session, cutoffs: cutoffs, now: now)
            guard let token = result.token, token.subject == BenchFixture.subject, token.issuedAt == loginTime else {
                throw BenchSetupError("session-cookie/\(name): the cookie does not verify: \(result)")
            }
        }
    }
}
