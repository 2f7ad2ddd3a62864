//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateTokens

extension GatewayRuntime {
    /// The gateway's JWT issuers when `issuers:` has `kind: jwt` items: the top-level keys' issuer (named
    /// `tokens`, when there are top-level keys) and each item by name, each with a verifier over its own keys
    /// only, and the ``IssuerChoice`` that picks one by a token's `iss`. Nil without such items: the routes then
    /// verify with the top-level verifier alone, exactly as before issuers had names.
    ///
    /// Each item's users are kept apart in the cutoffs (``VerificationPolicy/cutoffIssuer``); the top-level
    /// issuer's keep the bare user id, so the stores written before keep their meaning.
    static func jwtIssuers(
        _ configuration: GatewayConfiguration,
        topLevel: TokenVerifier?,
        topLevelRemote: RemoteKeyRefetch?,
        selection: ClaimSelection,
        sources: [RemoteKeySource.Identity: RemoteKeySource]
    ) throws -> (choice: IssuerChoice, entries: [RouteIssuers.Entry])? {
        guard !configuration.jwtIssuers.isEmpty else { return nil }
        var entries: [RouteIssuers.Entry] = []
        var issuerStrings: [String?] = []
        var defaultIndex: Int?
        if !configuration.keys.isEmpty {
            entries.append(
                RouteIssuers.Entry(
                    name: JWTIssuerConfiguration.topLevelName, verifier: topLevel, remoteKeys: topLevelRemote))
            issuerStrings.append(configuration.tokens.issuer)
            // Tokens without `iss` stay the top-level issuer's unless an item is the default.
            if !configuration.jwtIssuers.values.contains(where: \.isDefault) { defaultIndex = 0 }
        }
        for name in configuration.jwtIssuers.keys.sorted() {
            let issuer = configuration.jwtIssuers[name]!
            let fileKeys: KeySet?
            do {
                fileKeys = try Self.loadKeys(issuer.keys)
            } catch {
                throw GatewayStartupError("issuers: \(name): \(error)")
            }
            let remote = try Self.remoteKeys(
                keys: issuer.keys, algorithms: issuer.tokens.algorithms, sources: sources, fileKeys: fileKeys)
            var policy = VerificationPolicy()
            policy.claimNames = issuer.tokens.claims
            if let claim = issuer.tokenKindClaim { policy.claimNames.apiOnly = claim }
            policy.readsKindClaim = issuer.tokenKindClaim != nil
            policy.defaultKind = issuer.tokenKind
            policy.sessionMaxAge = Int64(issuer.tokens.sessionMaxAge.components.seconds)
            policy.clockSkew = Int64(issuer.tokens.clockSkew.components.seconds)
            policy.issuer = issuer.tokens.issuer
            policy.audiences = issuer.tokens.audience
            if !issuer.tokens.algorithms.isEmpty {
                policy.allowedAlgorithms = Set(issuer.tokens.algorithms)
            }
            policy.selection = selection
            policy.cutoffIssuer = name
            if remote.keys == nil && remote.refetch == nil {
                throw GatewayStartupError("issuers: \(name) has no usable key")
            }
            if issuer.isDefault { defaultIndex = entries.count }
            entries.append(
                RouteIssuers.Entry(
                    name: name, verifier: remote.keys.map { TokenVerifier(keys: $0, policy: policy) },
                    remoteKeys: remote.refetch))
            issuerStrings.append(issuer.tokens.issuer)
        }
        return (IssuerChoice(issuers: issuerStrings, defaultIndex: defaultIndex), entries)
    }
}
