//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateSessionCookies
import TokengateTokens

/// The one decision every request turns on: forward it (with which identity, stripping what), read its
/// body first, or answer it here.
///
/// Pure but for one thing: the route, the request and the moment in; a ``Decision`` out. The verifier and the
/// cutoff snapshot are immutable values read without locks, so this runs inline on the event loop. The one
/// effect: a token whose `kid` no fetched key has asks its key sets to fetch again (``RemoteKeyRefetch``,
/// rate-limited and lock-free), which only a token that failed anyway reaches.
struct RequestAuthorizer: Sendable {
    enum Decision: Equatable {
        /// Forward the request; `identity` is `nil` on a public route. `strip` names where the token was,
        /// so the rewriter can take it out (nil when the route keeps it or there was none).
        case forward(identity: VerifiedToken?, strip: TokenSource?)
        /// Read the body (up to `limit` bytes) and ask again.
        case readBody(limit: Int)
        case answer(GatewayAnswer)
    }

    let route: GatewayRoute
    let realm: String

    /// - Parameter cache: the event loop's verified tokens; it only spares the signature check of a token seen
    ///   before, never a route, time or cutoff check (``TokenVerifier/verify(_:accept:cutoffs:now:cache:)``).
    func decide(
        head: ClientRequestHead,
        body: [UInt8]?,
        cutoffs: CutoffSnapshot,
        now: Int64,
        cache: VerifiedTokenCache? = nil
    ) -> Decision {
        guard let tokens = self.route.tokens else {
            return .forward(identity: nil, strip: nil)
        }
        let found: (ArraySlice<UInt8>, TokenSource)
        switch self.route.extractor.extract(method: head.method, uri: head.uri, fields: head.fields, body: body) {
        case .answer(let answer):
            return .answer(answer)
        case .needsBody:
            return .readBody(limit: self.route.tokenBodyLimit)
        case .noToken:
            return .answer(.tokenRequired(realm: self.realm))
        case .token(let token, let source):
            found = (token, source)
        }
        var verdict: VerificationResult
        var remoteKeys = tokens.remoteKeys
        if let cookie = tokens.sessionCookie, cookie.sources.contains(found.1) {
            switch Self.signature(cookie, fields: head.fields) {
            case .repeated:
                return .answer(
                    .invalidRequest("more than one signature cookie", realm: self.realm, reason: "multiple_tokens"))
            case .value(let signature):
                verdict = Self.verify(found.0, signature: signature, cookie, tokens, cutoffs: cutoffs, now: now)
            }
        } else if let issuers = tokens.issuers {
            // Several issuers: the token's `iss` picks whose keys and policy check it.
            let choice = found.0.withUnsafeBytes { issuers.choice.choose($0) }
            switch choice {
            case .malformed:
                verdict = .invalid(.malformed)
            case .missingIssuer:
                verdict = .invalid(.missingIssuer)
            case .unknownIssuer:
                verdict = .invalid(.unknownIssuer)
            case .issuer(let index):
                if let entry = issuers.entries[index] {
                    remoteKeys = entry.remoteKeys
                    if let verifier = entry.verifier {
                        verdict = found.0.withUnsafeBytes {
                            verifier.verify($0, accept: tokens.accept, cutoffs: cutoffs, now: now, cache: cache)
                        }
                        if case .valid(var token) = verdict {
                            token.issuer = entry.name
                            verdict = .valid(token)
                        }
                    } else if let remote = entry.remoteKeys {
                        _ = remote.unknownKeyID(nowMilliseconds: now * 1000)
                        return .answer(.keysUnavailable(realm: self.realm))
                    } else {
                        verdict = .invalid(.malformed)
                    }
                } else {
                    verdict = .invalid(.issuerNotAccepted)
                }
            }
        } else if let verifier = tokens.verifier {
            verdict = found.0.withUnsafeBytes {
                verifier.verify($0, accept: tokens.accept, cutoffs: cutoffs, now: now, cache: cache)
            }
        } else if let remoteKeys = tokens.remoteKeys {
            // Every key entry is fetched and none has keys: the token may be good, the gateway cannot tell yet.
            _ = remoteKeys.unknownKeyID(nowMilliseconds: now * 1000)
            return .answer(.keysUnavailable(realm: self.realm))
        } else {
            // The extractor finds tokens only in the route's sources, each of which has a verifier.
            verdict = .invalid(.malformed)
        }
        switch verdict {
        case .valid(let token):
            return .forward(identity: token, strip: self.route.stripToken ? found.1 : nil)
        case .invalid(let reason):
            if reason == .wrongKind {
                return .answer(.insufficientScope(realm: self.realm, description: reason.description))
            }
            if reason == .insufficientScope {
                return .answer(
                    .insufficientScope(
                        realm: self.realm, description: reason.description, scope: tokens.requiredScopes ?? "",
                        reasonCode: reason.code))
            }
            if reason == .unknownKey, let remote = remoteKeys, remote.unknownKeyID(nowMilliseconds: now * 1000) {
                return .answer(.keysUnavailable(realm: self.realm))
            }
            return .answer(.invalidToken(realm: self.realm, reasonCode: reason.code, description: reason.description))
        }
    }

    private enum Signature {
        /// The signature cookie's value (nil when the format has none, or it is absent: the verifier says which).
        case value(Substring?)
        case repeated
    }

    /// cookie-session's companion `NAME.sig` cookie, read like the token's own cookie: one or none.
    private static func signature(_ cookie: RouteSessionCookieCheck, fields: RequestFields) -> Signature {
        guard let name = cookie.signatureCookie else { return .value(nil) }
        let values = CookieHeader.values(named: name, in: fields.values(name: "cookie"))
        guard values.count <= 1 else { return .repeated }
        return .value(values.first)
    }

    /// The site's login cookie, with the checks a JWT gets; the answer in a JWT's terms, so that a bad cookie
    /// gets the same 401 as a bad JWT.
    private static func verify(
        _ value: ArraySlice<UInt8>, signature: Substring?, _ cookie: RouteSessionCookieCheck, _ tokens: RouteTokenCheck,
        cutoffs: CutoffSnapshot, now: Int64
    ) -> VerificationResult {
        value.withUnsafeBytes { valueBytes in
            guard var signature else {
                return cookie.verifier.verify(valueBytes, accept: tokens.accept, cutoffs: cutoffs, now: now)
                    .verificationResult
            }
            return signature.withUTF8 { signatureBytes in
                cookie.verifier.verify(
                    valueBytes, signature: UnsafeRawBufferPointer(signatureBytes), accept: tokens.accept,
                    cutoffs: cutoffs, now: now
                ).verificationResult
            }
        }
    }
}
