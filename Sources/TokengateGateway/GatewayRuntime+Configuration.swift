//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import Prometheus
import TokengateConfig
import TokengateTLS
import TokengateTokens

/// A configuration the gateway cannot run with, found while building the runtime (a key file that does
/// not parse, a certificate that does not match its key). Names the file and says what is wrong; never
/// prints key material.
public struct GatewayStartupError: Error, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

extension GatewayRuntime {
    /// Builds the runtime from a validated configuration: reads and parses every key file, builds the
    /// verifier, the routes and the upstream settings. Throws ``GatewayStartupError``.
    static func build(
        from configuration: GatewayConfiguration,
        cutoffs: CutoffSnapshotHolder,
        metrics: GatewayMetrics? = nil,
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        now: (@Sendable () -> Int64)? = nil
    ) throws -> GatewayRuntime {
        let keys = try Self.loadKeys(configuration.keys)
        var policy = VerificationPolicy()
        policy.claimNames = TokengateTokens.ClaimNames(
            user: configuration.tokens.claims.user,
            issuedAt: configuration.tokens.claims.issuedAt,
            apiOnly: configuration.tokens.claims.apiOnly
        )
        policy.sessionMaxAge = Int64(configuration.tokens.sessionMaxAge.components.seconds)
        policy.clockSkew = Int64(configuration.tokens.clockSkew.components.seconds)
        policy.issuer = configuration.tokens.issuer
        policy.audience = configuration.tokens.audience.first
        if !configuration.tokens.algorithms.isEmpty {
            policy.allowedAlgorithms = Set(configuration.tokens.algorithms.compactMap { TokenAlgorithm(rawValue: $0.rawValue) })
        }
        let verifier = TokenVerifier(keys: keys, policy: policy)

        let upstreamNames = configuration.upstreams.keys.sorted()
        var upstreams: [UpstreamSettings] = []
        for name in upstreamNames {
            let upstream = configuration.upstreams[name]!
            var tlsContext: TLSClientContext?
            if upstream.targets.contains(where: { $0.scheme == .https }) {
                do {
                    tlsContext = try TLSClientContext(
                        trustRootsPath: upstream.tls?.caFile?.path,
                        verifyPeer: upstream.tls?.verify ?? true,
                        alpnProtocols: ["http/1.1"]
                    )
                } catch {
                    throw GatewayStartupError("upstream '\(name)': cannot set up TLS: \(error)")
                }
            }
            upstreams.append(
                UpstreamSettings(
                    name: name,
                    targets: upstream.targets.map {
                        .init(host: $0.host, port: $0.port, useTLS: $0.scheme == .https, display: $0.description)
                    },
                    connectTimeout: .init(upstream.connectTimeout),
                    responseTimeout: .init(upstream.responseTimeout),
                    idleTimeout: .init(upstream.idleTimeout),
                    maxConnectionsPerTarget: upstream.maxConnectionsPerTarget,
                    retries: upstream.retries,
                    failuresBeforeEjection: upstream.ejection.consecutiveFailures,
                    ejectionTime: .init(upstream.ejection.duration),
                    tlsContext: tlsContext,
                    tlsServerName: upstream.tls?.serverName
                )
            )
        }

        var routes: [GatewayRoute] = []
        for route in configuration.routes {
            let name = (route.host ?? "") + route.pathPrefix
            let accept: AcceptedKinds?
            if route.accept.acceptsTokens {
                var kinds: AcceptedKinds = []
                if route.accept.api { kinds.insert(.api) }
                if route.accept.session { kinds.insert(.session) }
                accept = kinds
            } else {
                accept = nil
            }
            let upstreamIndex = route.upstream.flatMap { upstreamNames.firstIndex(of: $0) } ?? 0
            var tokenPage: TokenPageRoute?
            if case .tokenPage(let page) = route.kind {
                tokenPage = try Self.tokenPageRoute(page, configuration: configuration, verifier: verifier)
            }
            routes.append(
                GatewayRoute(
                    name: name,
                    accept: accept,
                    extractor: TokenExtractor(sources: route.sources, realm: configuration.realm),
                    upstreamIndex: upstreamIndex,
                    stripToken: route.forwardToken == .strip,
                    tokenBodyLimit: min(route.bodyLimit ?? configuration.limits.maxTokenBodyBytes, configuration.limits.maxTokenBodyBytes),
                    bodyLimit: route.bodyLimit ?? configuration.limits.maxBodyBytes,
                    tokenPage: tokenPage
                )
            )
        }
        let metrics =
            metrics ?? GatewayMetrics(routeNames: routes.map(\.name), upstreamNames: upstreamNames, registry: registry)
        return GatewayRuntime(
            routes: routes,
            routeTable: RouteTable(routes: configuration.routes),
            upstreams: upstreams,
            verifier: verifier,
            cutoffs: cutoffs,
            realm: configuration.realm,
            limits: configuration.limits,
            accessLog: configuration.log.accessLog,
            metrics: metrics,
            hsts: configuration.hsts.headerValue,
            now: now ?? { Int64(Date().timeIntervalSince1970) }
        )
    }

    /// The responder of a token page: the signing key (a private JWK Set; never exposed) and the login mode.
    static func tokenPageRoute(
        _ page: TokenPageConfiguration,
        configuration: GatewayConfiguration,
        verifier: TokenVerifier
    ) throws -> TokenPageRoute {
        guard let signingKey = configuration.signingKey else {
            throw GatewayStartupError("a token_page route needs signing_key")
        }
        guard case .jwks(let path) = signingKey.source else {
            throw GatewayStartupError("signing_key: token pages sign with a private JWK Set (jwks: PATH)")
        }
        guard let bytes = FileManager.default.contents(atPath: path.path) else {
            throw GatewayStartupError("signing_key: cannot read \(path)")
        }
        let signer: TokenSigner
        do {
            signer = try TokenSigner(
                privateJWKS: Array(bytes),
                keyID: signingKey.keyID,
                claimNames: TokengateTokens.ClaimNames(
                    user: configuration.tokens.claims.user,
                    issuedAt: configuration.tokens.claims.issuedAt,
                    apiOnly: configuration.tokens.claims.apiOnly
                )
            )
        } catch {
            throw GatewayStartupError("signing_key \(path): \(error)")
        }
        var whoami: WhoamiClient?
        if case .whoami(let settings) = page.login {
            whoami = try WhoamiClient(configuration: settings)
        }
        return TokenPageRoute(
            responder: TokenPageResponder(configuration: page, signer: signer, verifier: verifier),
            whoami: whoami
        )
    }

    /// Every verification key of the configuration, merged into one set (several keys at once, so keys
    /// rotate without downtime).
    static func loadKeys(_ sources: [KeySourceConfiguration]) throws -> KeySet {
        var merged: KeySet?
        for source in sources {
            let keys: KeySet
            do {
                switch source.source {
                case .jwks(let path):
                    keys = try KeySet.load(path: path.path)
                case .pem(let path):
                    guard let data = FileManager.default.contents(atPath: path.path),
                        let pem = String(data: data, encoding: .utf8)
                    else {
                        throw GatewayStartupError("cannot read \(path)")
                    }
                    keys = try KeySet(
                        pem: pem,
                        algorithm: source.algorithm.flatMap { TokenAlgorithm(rawValue: $0.rawValue) },
                        keyID: source.keyID
                    )
                case .hmacFile(let path):
                    guard var secret = FileManager.default.contents(atPath: path.path).map(Array.init) else {
                        throw GatewayStartupError("cannot read \(path)")
                    }
                    while secret.last == UInt8(ascii: "\n") || secret.last == UInt8(ascii: "\r") { secret.removeLast() }
                    keys = try Self.hmacKeySet(secret, source: source, origin: path.description)
                case .hmacEnvironment(let variable):
                    guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
                        throw GatewayStartupError("environment variable \(variable) is not set")
                    }
                    keys = try Self.hmacKeySet(Array(value.utf8), source: source, origin: "$\(variable)")
                }
            } catch let error as GatewayStartupError {
                throw error
            } catch {
                throw GatewayStartupError("keys: \(error)")
            }
            merged = try merged.map { try $0.merging(keys) } ?? keys
        }
        guard let merged else {
            throw GatewayStartupError("keys: no verification key is configured")
        }
        return merged
    }

    private static func hmacKeySet(_ secret: [UInt8], source: KeySourceConfiguration, origin: String) throws -> KeySet {
        guard let name = source.algorithm, let algorithm = TokenAlgorithm(rawValue: name.rawValue) else {
            throw GatewayStartupError("keys: the HMAC secret from \(origin) needs an `alg` (HS256, HS384 or HS512)")
        }
        return try KeySet(hmacSecret: secret, algorithm: algorithm, keyID: source.keyID)
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
