//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

// MARK: JWT issuers

extension ConfigurationDecoder {
    static let jwtIssuerKeys = ["name", "kind", "default", "tokens", "keys", "token_kind", "token_kind_claim"]

    /// One `kind: jwt` item of `issuers:`: the top-level `tokens` and `keys` pair, named, plus what a provider's
    /// tokens lack (their kind) and whether tokens without `iss` are its own.
    func jwtIssuer(_ node: ConfigNode, name: String) throws(ConfigurationError) -> JWTIssuerConfiguration {
        let map = try node.mapping(allowed: Self.jwtIssuerKeys)
        let tokensNode = try map.required("tokens")
        // The verified-token cache is the gateway's, shared by every issuer: it is set once, at the top level.
        if let cacheNode = try tokensNode.anyMapping()["verified_cache"] {
            throw cacheNode.error(.conflict, "verified_cache is set once for every issuer, in the top-level tokens")
        }
        let tokens = try self.tokens(tokensNode)
        guard let issuer = tokens.issuer, !issuer.isEmpty, issuer.utf8.count <= 2048 else {
            throw tokensNode.error(
                .missingKey, "an issuer needs tokens.issuer (1 to 2048 bytes): the iss its tokens carry, which picks the issuer")
        }
        let keysNode = try map.required("keys")
        let keys = try self.keys(keysNode, tokens: tokens)
        guard !keys.isEmpty else {
            throw keysNode.error(.missingKey, "an issuer needs at least one key source (a file, jwks_url or discovery)")
        }
        var kind = TokenKind.api
        if let kindNode = map["token_kind"] {
            switch try kindNode.string(maximumLength: 16) {
            case "api": kind = .api
            case "session": kind = .session
            default: throw kindNode.error(.invalidValue, "expected api or session, got \(kindNode.summary)")
            }
        }
        let kindClaim = try map["token_kind_claim"]?.string(maximumLength: 128)
        if let kindClaim, kindClaim.isEmpty || [tokens.claims.user, tokens.claims.issuedAt].contains(kindClaim) {
            throw map.keyNode("token_kind_claim").error(
                .conflict, "token_kind_claim names a boolean claim other than the user and issued-at claims")
        }
        return JWTIssuerConfiguration(
            name: name,
            tokens: tokens,
            keys: keys,
            isDefault: try map["default"]?.bool() ?? false,
            tokenKind: kind,
            tokenKindClaim: kindClaim
        )
    }

    /// The checks across issuers, every problem at once: `iss` picks one issuer, so no two may share it (nor share
    /// it with the top-level `tokens.issuer`), and at most one takes the tokens without `iss`. `topLevel` is nil
    /// when `tokens` has a problem of its own (reported there).
    func jwtIssuerProblems(_ section: IssuerSection, topLevel: TokenSettings?, topLevelKeys: Bool?)
        -> [ConfigurationError]
    {
        var problems: [ConfigurationError] = []
        var byIssuer: [String: String] = [:]
        var defaultName: String?
        for name in section.jwtOrder {
            guard let issuer = section.jwt[name], let node = section.nodes[name] else { continue }
            let iss = issuer.tokens.issuer ?? ""
            let issNode = Self.child(node, "tokens").flatMap { Self.child($0, "issuer") } ?? node
            if let other = byIssuer[iss] {
                problems.append(issNode.error(
                    .duplicate, "issuers \(other) and \(name) have the same tokens.issuer: iss must pick one issuer"))
            } else if let topLevel, topLevel.issuer == iss {
                problems.append(issNode.error(
                    .duplicate, "the top-level tokens.issuer is the same: iss must pick one issuer"))
            } else {
                byIssuer[iss] = name
            }
            if issuer.isDefault {
                if let defaultName {
                    problems.append((Self.child(node, "default") ?? node).error(
                        .duplicate,
                        "issuers \(defaultName) and \(name) are both default: at most one takes the tokens without iss"))
                } else {
                    defaultName = name
                    // The token page's tokens carry `iss` only when tokens.issuer is set: without it they would
                    // go to this issuer and fail its keys.
                    if topLevelKeys == true, let topLevel, topLevel.issuer == nil {
                        problems.append((Self.child(node, "default") ?? node).error(
                            .conflict,
                            "\(name) takes the tokens without iss, and the top-level issuer's tokens carry none: "
                                + "set the top-level tokens.issuer"))
                    }
                }
            }
        }
        return problems
    }

    private static func child(_ node: ConfigNode, _ key: String) -> ConfigNode? {
        guard let map = try? node.anyMapping(), map.has(key) else { return nil }
        return map.keyNode(key)
    }
}

/// The `issuers:` list as decoded: each kind by name, and the items' nodes for the checks across issuers.
struct IssuerSection {
    var sessionCookie: [String: SessionCookieIssuerConfiguration] = [:]
    var jwt: [String: JWTIssuerConfiguration] = [:]
    /// The JWT issuers' names in file order (problems are reported in it).
    var jwtOrder: [String] = []
    var nodes: [String: ConfigNode] = [:]
}
