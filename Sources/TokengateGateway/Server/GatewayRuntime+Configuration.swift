//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Foundation
import NIOCore
import Prometheus
import TokengateConfig
import TokengateSessionCookies
import TokengateTLS
import TokengateTokens
import TokengateHTTP

/// A configuration the gateway cannot run with, found while building the runtime (a key file that does
/// not parse, a certificate that does not match its key). Names the file and says what is wrong; never
/// prints key material.
public struct GatewayStartupError: Error, CustomStringConvertible {
    public var description: String
    /// The operating system's error number when a system call refused (a listener's `bind`), else `nil`.
    public var errnoCode: Int32?

    package init(_ description: String, errnoCode: Int32? = nil) {
        self.description = description
        self.errnoCode = errnoCode
    }
}

extension GatewayRuntime {
    /// Builds the runtime from a validated configuration: reads and parses every key file, builds the
    /// verifiers (the gateway's, and one per route that narrows it), the routes and the upstream settings.
    /// Throws ``GatewayStartupError``.
    ///
    /// - Parameter redeemedCodes: the memory of redeemed PKCE codes: the process's (``GatewayServer`` keeps one
    ///   across reloads), or a throwaway for a build that serves nothing (``RedeemedCodeMemory/unused()``).
    ///   No default: a fresh memory made silently would forget every redeemed code.
    static func build(
        from configuration: GatewayConfiguration,
        cutoffs: CutoffSnapshotHolder,
        metrics: GatewayMetrics? = nil,
        registry: MetricsRegistry = MetricsRegistry(),
        tokenBodyMemory: TokenBodyMemory? = nil,
        responseBuffers: ResponseBufferBudget? = nil,
        whoamiCallsInFlight: ManagedAtomic<Int> = ManagedAtomic(0),
        redeemedCodes: RedeemedCodeMemory,
        devices: DeviceRegistry? = nil,
        now: (@Sendable () -> Int64)? = nil,
        nowMilliseconds: (@Sendable () -> Int64)? = nil,
        fileKeys: LoadedFileKeys? = nil,
        remoteKeys: [RemoteKeySource.Identity: RemoteKeySource] = [:]
    ) throws -> GatewayRuntime {
        let loadedFileKeys = try fileKeys ?? LoadedFileKeys(keys: Self.loadKeys(configuration.keys))
        let remote = try Self.remoteKeys(
            keys: configuration.keys, algorithms: configuration.tokens.algorithms, sources: remoteKeys,
            fileKeys: loadedFileKeys.keys)
        let keys = remote.keys
        var policy = VerificationPolicy()
        policy.claimNames = configuration.tokens.claims
        policy.sessionMaxAge = Int64(configuration.tokens.sessionMaxAge.components.seconds)
        policy.clockSkew = Int64(configuration.tokens.clockSkew.components.seconds)
        policy.issuer = configuration.tokens.issuer
        policy.audiences = configuration.tokens.audience
        if !configuration.tokens.algorithms.isEmpty {
            policy.allowedAlgorithms = Set(configuration.tokens.algorithms)
        }
        policy.selection = try Self.claimSelection(configuration.routes)
        // Nil without keys, which is fine as long as no route checks a token (checked per route below).
        let verifier = keys.map { TokenVerifier(keys: $0, policy: policy) }
        let jwtIssuers = try Self.jwtIssuers(
            configuration, topLevel: verifier, topLevelRemote: remote.refetch, selection: policy.selection,
            sources: remoteKeys)

        let upstreamNames = configuration.upstreams.keys.sorted()
        var upstreams: [UpstreamSettings] = []
        for name in upstreamNames {
            let upstream = configuration.upstreams[name]!
            var tlsContext: TLSClientContext?
            if upstream.targets.contains(where: { $0.scheme == .https }) {
                let clientCertificate = upstream.tls?.clientCertificate.map {
                    TLSCertificateSource(certificatePath: $0.cert.path, privateKeyPath: $0.key.path)
                }
                do {
                    tlsContext = try TLSClientContext(
                        trustRootsPath: upstream.tls?.caFile?.path,
                        verifyPeer: upstream.tls?.verify ?? true,
                        alpnProtocols: ["http/1.1"],
                        clientCertificate: clientCertificate
                    )
                } catch let error as TLSError where error.file != nil {
                    // A client certificate or key that does not load, under its own setting, like a listener's.
                    let setting = error.file?.isPrivateKey == true ? "key" : "cert"
                    throw GatewayStartupError("upstreams.\(name).tls.client_certificate.\(setting): \(error.message)")
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
                    tlsServerName: upstream.tls?.serverName,
                    keepAlive: upstream.keepAlive,
                    secretHeader: try upstream.secretHeader.map { try UpstreamSecretHeader(reading: $0, upstream: name) },
                    healthCheck: upstream.healthCheck
                )
            )
        }

        let deliveryCookies = Self.tokenPageDeliveryCookies(configuration.routes)
        let sessionCookieVerifiers = try Self.sessionCookieVerifiers(configuration)
        var routes: [GatewayRoute] = []
        for (index, route) in configuration.routes.enumerated() {
            let name = (route.host ?? "") + route.pathPrefix
            var tokens: RouteTokenCheck?
            var withheldCookies = Self.withheldCookies(deliveryCookies, route: route)
            if route.accept.acceptsTokens {
                // A route that reads only a site's login cookie has no JWT source and needs no key.
                var routeVerifier: TokenVerifier?
                var remoteKeys: RemoteKeyRefetch?
                if !route.sources.isEmpty, jwtIssuers == nil {
                    guard verifier != nil || remote.refetch != nil else {
                        throw GatewayStartupError(
                            "routes[\(index)] (\(name)) accepts tokens, but keys is empty: configure a verification key"
                        )
                    }
                    routeVerifier = verifier.map { Self.routeVerifier(route, gateway: $0) }
                    remoteKeys = remote.refetch
                }
                var routeIssuers: RouteIssuers?
                if let issuers = jwtIssuers, !route.sources.isEmpty {
                    let accepted = route.acceptedIssuers(
                        topLevelKeys: !configuration.keys.isEmpty, jwtIssuers: configuration.jwtIssuers)
                    routeIssuers = RouteIssuers(
                        choice: issuers.choice,
                        entries: issuers.entries.map { entry in
                            guard accepted.contains(entry.name) else { return nil }
                            return RouteIssuers.Entry(
                                name: entry.name,
                                verifier: entry.verifier.map { Self.routeVerifier(route, gateway: $0) },
                                remoteKeys: entry.remoteKeys)
                        })
                }
                var sessionCookie: RouteSessionCookieCheck?
                if let cookie = route.sessionCookie {
                    guard let cookieVerifier = sessionCookieVerifiers[cookie.issuer] else {
                        throw GatewayStartupError("routes[\(index)] (\(name)) names an unknown issuer \(cookie.issuer)")
                    }
                    let signatureCookie = cookieVerifier.format.signatureCookieName
                    sessionCookie = RouteSessionCookieCheck(
                        sources: cookie.sources, verifier: cookieVerifier, signatureCookie: signatureCookie)
                    // The signature cookie goes with the token: stripped with it.
                    if route.forwardToken == .strip, let signatureCookie { withheldCookies.append(signatureCookie) }
                }
                var kinds: AcceptedKinds = []
                if route.accept.api { kinds.insert(.api) }
                if route.accept.session { kinds.insert(.session) }
                tokens = RouteTokenCheck(
                    accept: kinds, verifier: routeVerifier, sessionCookie: sessionCookie, remoteKeys: remoteKeys,
                    requiredScopes: route.requiredScopes.isEmpty ? nil : route.requiredScopes.joined(separator: " "),
                    issuers: routeIssuers)
            }
            let upstreamIndex = route.upstream.flatMap { upstreamNames.firstIndex(of: $0) } ?? 0
            var tokenPage: TokenPageRoute?
            if case .tokenPage(let page) = route.kind {
                if case .sessionCookie = page.login, verifier == nil, remote.refetch == nil {
                    throw GatewayStartupError(
                        "routes[\(index)] (\(name)) checks a session cookie, but keys is empty: configure a "
                            + "verification key"
                    )
                }
                tokenPage = try Self.tokenPageRoute(
                    page, name: name, configuration: configuration, policy: policy, verifier: verifier,
                    whoamiCallsInFlight: whoamiCallsInFlight, redeemedCodes: redeemedCodes, devices: devices)
            }
            routes.append(
                GatewayRoute(
                    name: name,
                    tokens: tokens,
                    extractor: TokenExtractor(
                        sources: route.allSources, realm: configuration.realm,
                        credentialedOrigins: TrafficPolicy.credentialedOrigins(route)),
                    upstreamIndex: upstreamIndex,
                    stripToken: route.forwardToken == .strip,
                    withheldCookies: withheldCookies,
                    tokenBodyLimit: min(route.bodyLimit ?? configuration.limits.maxTokenBodyBytes, configuration.limits.maxTokenBodyBytes),
                    bodyLimit: route.bodyLimit ?? configuration.limits.maxBodyBytes,
                    responseMinRate: route.responseMinRate ?? configuration.limits.responseMinRate,
                    tokenPage: tokenPage,
                    forwardedClaimHeaders: route.forwardClaims.map { $0.header.lowercased() },
                    webSocket: route.webSocket
                )
            )
        }
        let metrics =
            metrics ?? GatewayMetrics(routeNames: routes.map(\.name), upstreamNames: upstreamNames, registry: registry)
        return GatewayRuntime(
            routes: routes,
            routeTable: RouteTable(routes: configuration.routes),
            upstreams: upstreams,
            cutoffs: cutoffs,
            realm: configuration.realm,
            limits: configuration.limits,
            accessLog: configuration.log.accessLog,
            metrics: metrics,
            hsts: configuration.hsts.headerValue,
            tokenBodyMemory: tokenBodyMemory,
            responseBuffers: responseBuffers,
            now: now ?? { Int64(Date().timeIntervalSince1970) },
            nowMilliseconds: Self.millisecondClock(nowMilliseconds, seconds: now),
            fileKeys: loadedFileKeys,
            traffic: TrafficPolicy(configuration) { [metrics] in metrics.rateLimitEvictions.increment(by: Int64($0)) }
        )
    }

    /// The file keys merged with the fetched sets that have keys now, and what a token with an unknown `kid`
    /// on a route then does (``RemoteKeyRefetch``); `refetch` is `nil` when no key entry is fetched.
    static func remoteKeys(
        keys: [KeySourceConfiguration],
        algorithms: [TokenAlgorithm],
        sources: [RemoteKeySource.Identity: RemoteKeySource],
        fileKeys: KeySet?
    ) throws -> (keys: KeySet?, refetch: RemoteKeyRefetch?) {
        let identities = RemoteKeySets.identities(keys: keys, algorithms: algorithms)
        guard !identities.isEmpty else { return (fileKeys, nil) }
        var merged = fileKeys
        var used: [RemoteKeySource] = []
        var someUnavailable = false
        for identity in identities {
            guard let source = sources[identity] else {
                someUnavailable = true
                continue
            }
            used.append(source)
            guard let keys = source.keys else {
                someUnavailable = true
                continue
            }
            do {
                merged = try merged.map { try $0.merging(keys) } ?? keys
            } catch {
                throw GatewayStartupError("key set \(source.label): \(error)")
            }
        }
        return (merged, RemoteKeyRefetch(sources: used, someUnavailable: someUnavailable))
    }

    /// The milliseconds clock: the given one; else an injected seconds clock times 1000 (so both agree); else
    /// the system clock.
    private static func millisecondClock(
        _ milliseconds: (@Sendable () -> Int64)?,
        seconds: (@Sendable () -> Int64)?
    ) -> @Sendable () -> Int64 {
        if let milliseconds { return milliseconds }
        if let seconds { return { seconds() * 1000 } }
        return { Int64(Date().timeIntervalSince1970 * 1000) }
    }

    /// Where a token page's delivery cookie goes: its name, and the host and path a browser sends it to.
    struct DeliveryCookie {
        let name: String
        /// The token page route's host; `nil` when it serves every host (the cookie may then come for any).
        let host: String?
        /// `cookie_path`.
        let path: String
    }

    /// The cookies the token pages deliver api tokens in (`cookie_name`, `auth_token` by default).
    static func tokenPageDeliveryCookies(_ routes: [RouteConfiguration]) -> [DeliveryCookie] {
        routes.compactMap { route in
            guard case .tokenPage(let page) = route.kind else { return nil }
            return DeliveryCookie(name: page.cookieName, host: route.host, path: page.cookiePath)
        }
    }

    /// The token pages' cookies a route's backend must not get: the delivery cookies, and the confirmation cookie.
    ///
    /// The delivery cookie holds a long-lived api token and has `Path=/` by default, so a browser or an app's
    /// web view sends it with every request to the page's host, including to public and session routes that
    /// never read it: forwarded as is, the api token would end up in every backend's request logs. It is
    /// withheld on every route a browser may send it to — the page's host (any host for a page or a route that
    /// has none; the cookie is host-only) and paths under `cookie_path` — except one that reads that cookie as
    /// its token source and keeps the token (`forward_token: keep`), where forwarding it is what the route asks
    /// for. A route on another host keeps a cookie of the same name: it is that site's own. (A route that reads
    /// the cookie and strips it takes it out anyway; listing it here too also covers a request whose token came
    /// another way.)
    static func withheldCookies(_ deliveryCookies: [DeliveryCookie], route: RouteConfiguration) -> [String] {
        var names: [String] = []
        for cookie in deliveryCookies where !names.contains(cookie.name) {
            if let pageHost = cookie.host, let routeHost = route.host, pageHost.lowercased() != routeHost.lowercased() {
                continue
            }
            // The route's paths and the cookie's overlap when one prefix lies under the other.
            guard route.pathPrefix.hasPrefix(cookie.path) || cookie.path.hasPrefix(route.pathPrefix) else { continue }
            if route.forwardToken == .keep, route.sources.contains(.cookie(cookie.name)) {
                continue
            }
            names.append(cookie.name)
        }
        // The confirmation page's cookie (``TokenPageConfirmationCookie``) has `Path=/`: withheld on every route
        // of a page's host, whatever its path and token sources. It is the gateway's own, never a backend's.
        let onPageHost = deliveryCookies.contains { cookie in
            guard let pageHost = cookie.host, let routeHost = route.host else { return true }
            return pageHost.lowercased() == routeHost.lowercased()
        }
        if onPageHost {
            names.append(TokenPageConfirmationCookie.name)
        }
        return names
    }

    /// What the verifiers read besides the checked claims: every route's `require_scopes` and `forward_claims`,
    /// once each. One selection for all routes, so that they share cached tokens (``ClaimSelection``).
    static func claimSelection(_ routes: [RouteConfiguration]) throws -> ClaimSelection {
        var scopes: [String] = []
        var claims: [String] = []
        for route in routes {
            for scope in route.requiredScopes where !scopes.contains(scope) { scopes.append(scope) }
            for claim in route.forwardClaims.map(\.claim) where !claims.contains(claim) { claims.append(claim) }
        }
        guard scopes.count <= ClaimSelection.maxScopes else {
            throw GatewayStartupError(
                "the routes require \(scopes.count) distinct scopes; at most \(ClaimSelection.maxScopes) are supported")
        }
        guard claims.count <= ClaimSelection.maxForwardedClaims else {
            throw GatewayStartupError(
                "the routes forward \(claims.count) distinct claims; at most \(ClaimSelection.maxForwardedClaims) "
                    + "are supported")
        }
        return ClaimSelection(scopes: scopes, forwardedClaims: claims)
    }

    /// The gateway's verifier narrowed by a route's `algorithms` and `require_claims`, or the gateway's own
    /// when the route narrows nothing. The key set is shared; only the policy differs.
    static func routeVerifier(_ route: RouteConfiguration, gateway: TokenVerifier) -> TokenVerifier {
        guard route.algorithms != nil || !route.requiredClaims.isEmpty || !route.requiredScopes.isEmpty
            || !route.forwardClaims.isEmpty
        else { return gateway }
        var policy = gateway.policy
        policy.requiredScopes = route.requiredScopes
        policy.forwardedClaims = route.forwardClaims.map(\.claim)
        if let names = route.algorithms {
            // The configuration already keeps a route's list inside tokens.algorithms; intersecting anyway
            // means a route can only ever narrow.
            let allowed = Set(names)
            policy.allowedAlgorithms = policy.allowedAlgorithms.map { $0.intersection(allowed) } ?? allowed
        }
        for claim in route.requiredClaims {
            switch claim {
            case .exp: policy.requiredClaims.insert(.expiry)
            case .nbf: policy.requiredClaims.insert(.notBefore)
            case .iss: policy.requiredClaims.insert(.issuer)
            case .aud: policy.requiredClaims.insert(.audience)
            }
        }
        // Narrowed, not rebuilt: the route then shares the gateway's cached tokens (VerifiedTokenCache).
        return gateway.narrowed(to: policy)
    }

    /// The responder of a token page: the signing key (a private JWK Set; never exposed) and the login mode.
    static func tokenPageRoute(
        _ page: TokenPageConfiguration,
        name: String,
        configuration: GatewayConfiguration,
        policy: VerificationPolicy,
        verifier: TokenVerifier?,
        whoamiCallsInFlight: ManagedAtomic<Int>,
        redeemedCodes: RedeemedCodeMemory,
        devices: DeviceRegistry? = nil
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
                algorithm: signingKey.algorithm,
                claimNames: configuration.tokens.claims
            )
        } catch {
            throw GatewayStartupError("signing_key \(path): \(error)")
        }
        let siteMint = try page.mintIssuer.map { name in
            var site = SiteMint(
                minter: try Self.sessionCookieMinter(name, configuration: configuration),
                cookieName: configuration.sessionCookieIssuers[name]?.cookieName ?? name,
                signatureCookieName: configuration.sessionCookieIssuers[name]?.signatureCookieName)
            site.deliversAsCookie = configuration.sessionCookieIssuers[name]?.format != .flask
            site.whoamiHeaders = try page.mintWhoamiHeaders.map { (try Self.sessionPointer($0.pointer), $0.value) }
            site.constants = try page.mintConstants.map { (try Self.sessionPointer($0.pointer), $0.value) }
            return site
        }
        var whoami: WhoamiClient?
        if case .whoami(let settings) = page.login {
            whoami = try WhoamiClient(
                configuration: settings, siteHeaders: siteMint?.whoamiHeaders.map(\.header) ?? [],
                callsInFlight: whoamiCallsInFlight)
        }
        return TokenPageRoute(
            responder: TokenPageResponder(
                configuration: page,
                signer: signer,
                sessionVerifier: verifier,
                policy: policy,
                page: name,
                redeemedCodes: redeemedCodes,
                mintsDevices: devices != nil,
                refreshes: devices?.refresh != nil,
                siteMint: siteMint
            ),
            whoami: whoami,
            devices: devices
        )
    }

    /// Every verification key of the configuration, merged into one set (several keys at once, so keys
    /// rotate without downtime). Nil when `keys` is empty (allowed while no route checks tokens).
    static func loadKeys(_ sources: [KeySourceConfiguration]) throws -> KeySet? {
        var merged: KeySet?
        for (index, source) in sources.enumerated() {
            let keys: KeySet
            do {
                switch source.source {
                case .remote:
                    // Fetched in the background (``RemoteKeySource``), merged by ``remoteKeys(_:sources:fileKeys:)``.
                    continue
                case .jwks(let path):
                    // The entry's alg binds the set's JWKs that carry none of their own.
                    keys = try KeySet.load(
                        path: path.path,
                        algorithm: source.algorithm
                    )
                case .pem(let path):
                    guard let data = FileManager.default.contents(atPath: path.path),
                        let pem = String(data: data, encoding: .utf8)
                    else {
                        throw GatewayStartupError("cannot read \(path)")
                    }
                    keys = try KeySet(
                        pem: pem,
                        algorithm: source.algorithm,
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
            } catch {
                // Which entry: with several keys, "the RSA modulus has 1024 bits" alone does not say which.
                throw GatewayStartupError("keys[\(index)] (\(Self.describe(source))): \(error)")
            }
            do {
                merged = try merged.map { try $0.merging(keys) } ?? keys
            } catch {
                throw GatewayStartupError("keys[\(index)] (\(Self.describe(source))): \(error)")
            }
        }
        return merged
    }

    /// Where a key entry's material comes from, as the configuration names it (never the material).
    private static func describe(_ source: KeySourceConfiguration) -> String {
        switch source.source {
        case .jwks(let path): "jwks \(path.original)"
        case .pem(let path): "pem \(path.original)"
        case .hmacFile(let path): "hmac_file \(path.original)"
        case .hmacEnvironment(let variable): "hmac_env \(variable)"
        case .remote(let remote): "\(remote.kind == .discovery ? "discovery" : "jwks_url") \(remote.url)"
        }
    }

    private static func hmacKeySet(_ secret: [UInt8], source: KeySourceConfiguration, origin: String) throws -> KeySet {
        guard let algorithm = source.algorithm else {
            throw GatewayStartupError("the HMAC secret from \(origin) needs an `alg` (HS256, HS384 or HS512)")
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
