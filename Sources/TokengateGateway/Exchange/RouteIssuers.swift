//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// A route's JWT issuers on a gateway that has several (`issuers:` items of `kind: jwt`): how a token's `iss`
/// picks one (``IssuerChoice``, the same for every route), and for each issuer the route's verifier, or nil
/// when the route does not accept it (`issuer_not_accepted`).
///
/// Each issuer's verifier holds only that issuer's keys, so the choice never widens what a key can verify:
/// a token naming issuer B is checked with B's keys and policy alone.
struct RouteIssuers: Sendable {
    let choice: IssuerChoice
    /// In the order of ``choice``'s issuers.
    let entries: [Entry?]

    struct Entry: Sendable {
        /// The issuer's name (`tokens` for the top-level keys'), for the access log.
        let name: String
        /// The issuer's verifier narrowed by the route; nil while every key entry of the issuer is fetched and
        /// none has keys (``remoteKeys`` is set then).
        let verifier: TokenVerifier?
        let remoteKeys: RemoteKeyRefetch?
    }
}
