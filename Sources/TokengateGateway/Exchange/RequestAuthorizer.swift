//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

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

    func decide(head: ClientRequestHead, body: [UInt8]?, cutoffs: CutoffSnapshot, now: Int64) -> Decision {
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
        guard let verifier = tokens.verifier else {
            // Every key entry is fetched and none has keys: the token may be good, the gateway cannot tell yet.
            _ = tokens.remoteKeys?.unknownKeyID(nowMilliseconds: now * 1000)
            return .answer(.keysUnavailable(realm: self.realm))
        }
        let verdict = found.0.withUnsafeBytes {
            verifier.verify($0, accept: tokens.accept, cutoffs: cutoffs, now: now)
        }
        switch verdict {
        case .valid(let token):
            return .forward(identity: token, strip: self.route.stripToken ? found.1 : nil)
        case .invalid(let reason):
            if reason == .wrongKind {
                return .answer(.insufficientScope(realm: self.realm, description: reason.description))
            }
            if reason == .unknownKey, let remote = tokens.remoteKeys, remote.unknownKeyID(nowMilliseconds: now * 1000) {
                return .answer(.keysUnavailable(realm: self.realm))
            }
            return .answer(.invalidToken(realm: self.realm, reasonCode: reason.code, description: reason.description))
        }
    }
}
