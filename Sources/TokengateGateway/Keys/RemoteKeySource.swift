//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Prometheus
import TokengateConfig
import TokengateTokens

/// One fetched key set (`jwks_url:` or `discovery:`), kept current in the background: fetched at start, again
/// before its cache lifetime ends (``RemoteKeySetSchedule``), and on a token with an unknown `kid` at most once
/// per `refetch_interval`.
///
/// Requests never read it: when the set changes, ``onChange`` asks the server to publish a new generation
/// whose verifiers hold the new keys, exactly as a reload publishes file keys (one atomic swap, no lock on the
/// request path). The only request-path entry is ``refetchForUnknownKey(nowMilliseconds:)``, reached by a token
/// that failed anyway, and lock-free (two atomics).
final class RemoteKeySource: Sendable {
    /// What makes two entries the same source (and a reload keep this one, with its keys, instead of
    /// starting over): the entry's settings, its `alg`, and the algorithms that bind keys without `alg`.
    struct Identity: Hashable, Sendable {
        var configuration: RemoteKeySetConfiguration
        var algorithm: TokenAlgorithm?
        var allowed: [TokenAlgorithm]
    }

    let identity: Identity
    /// The URL as configured, for logs and metrics (the configuration refuses URLs with credentials).
    let label: String
    private let client: KeySetHTTPClient
    private let eventLoop: any EventLoop
    private let logger: Logger
    private let state: NIOLockedValueBox<State>
    /// The earliest moment (ms) an unknown `kid` may start a fetch.
    private let unknownKeyFetchAllowedAt = ManagedAtomic<Int64>(0)
    private let fetching = ManagedAtomic<Bool>(false)
    private let metrics: Metrics
    private let now: @Sendable () -> Int64

    struct State {
        var schedule: RemoteKeySetSchedule
        var keys: KeySet?
        var lastDocument: [UInt8]?
        var timer: Scheduled<Void>?
        var ageTimer: RepeatedTask?
        var stopped = false
        var onChange: (@Sendable () -> Void)?
    }

    struct Metrics: Sendable {
        let fetches: Prometheus.Counter
        let failures: Prometheus.Counter
        let unknownKeyFetches: Prometheus.Counter
        let keys: Prometheus.Gauge
        let age: Prometheus.Gauge
        let lastSuccess: Prometheus.Gauge
    }

    init(
        identity: Identity,
        eventLoop: any EventLoop,
        logger: Logger,
        registry: MetricsRegistry,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    ) throws {
        let configuration = identity.configuration
        self.identity = identity
        self.label = configuration.url
        self.eventLoop = eventLoop
        self.logger = logger
        self.now = now
        do {
            self.client = try KeySetHTTPClient(
                caFile: configuration.caFile?.path,
                timeout: configuration.timeout,
                maxBytes: configuration.maxBytes
            )
        } catch {
            throw GatewayStartupError("\(configuration.url): cannot set up TLS: \(error)")
        }
        self.state = NIOLockedValueBox(State(schedule: RemoteKeySetSchedule(configuration)))
        let labels = [("source", configuration.url)]
        self.metrics = Metrics(
            fetches: registry.counter(
                "tokengate_key_set_fetches_total", labels: labels, help: "Fetches of a remote key set, by its URL."),
            failures: registry.counter(
                "tokengate_key_set_fetch_failures_total", labels: labels,
                help: "Fetches of a remote key set that failed (network, TLS, status, size, or an unusable set)."),
            unknownKeyFetches: registry.counter(
                "tokengate_key_set_unknown_kid_fetches_total", labels: labels,
                help: "Fetches of a remote key set started by a token whose kid no key had."),
            keys: registry.gauge(
                "tokengate_key_set_keys", labels: labels, help: "Usable keys in the remote key set in force."),
            age: registry.gauge(
                "tokengate_key_set_age_seconds", labels: labels,
                help: "Seconds since the remote key set in force was fetched."),
            lastSuccess: registry.gauge(
                "tokengate_key_set_last_success_timestamp_seconds", labels: labels,
                help: "Unix time of the last successful fetch of the remote key set.")
        )
    }

    /// The usable keys of the last good fetch; `nil` before the first, and after `max_stale` ran out.
    var keys: KeySet? {
        self.state.withLockedValue { $0.keys }
    }

    /// Called (on the source's event loop) after ``keys`` changed.
    func setOnChange(_ onChange: @escaping @Sendable () -> Void) {
        self.state.withLockedValue { $0.onChange = onChange }
    }

    /// Fetches now, and from then on on schedule.
    func start() {
        let age = self.eventLoop.scheduleRepeatedTask(initialDelay: .seconds(1), delay: .seconds(5)) { [weak self] _ in
            self?.recordAge()
        }
        self.state.withLockedValue { $0.ageTimer = age }
        self.eventLoop.execute { self.fetch() }
    }

    /// Stops fetching (the source left the configuration). A fetch under way finishes and is ignored.
    func stop() {
        self.state.withLockedValue { state in
            state.stopped = true
            state.timer?.cancel()
            state.ageTimer?.cancel()
            state.onChange = nil
        }
    }

    /// A token's `kid` is in no key: fetch now unless a fetch already ran within `refetch_interval`. Returns
    /// whether the token may verify once the fetch is in (a fetch was started or is under way): the caller then
    /// answers `503` (try again) instead of `401` (start over).
    func refetchForUnknownKey(nowMilliseconds now: Int64) -> Bool {
        let allowedAt = self.unknownKeyFetchAllowedAt.load(ordering: .relaxed)
        if now >= allowedAt {
            let interval = self.state.withLockedValue { $0.schedule.refetchInterval }
            let (won, _) = self.unknownKeyFetchAllowedAt.compareExchange(
                expected: allowedAt, desired: now + interval, ordering: .relaxed)
            if won {
                self.metrics.unknownKeyFetches.increment()
                self.eventLoop.execute { self.fetch() }
                return true
            }
        }
        return self.fetching.load(ordering: .relaxed)
    }

    /// One fetch, outside any schedule, for `check-config --connect`: the set as the gateway would read it.
    func probe() -> EventLoopFuture<FetchedKeySet> {
        self.eventLoop.flatSubmit {
            self.fetchDocument().flatMapThrowing { document in
                try FetchedKeySet(jwks: document.body, algorithm: self.identity.algorithm, allowed: self.identity.allowed)
            }
        }
    }

    // MARK: Fetching

    private func fetch() {
        self.eventLoop.assertInEventLoop()
        guard !self.state.withLockedValue({ $0.stopped }) else { return }
        guard self.fetching.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged else { return }
        self.metrics.fetches.increment()
        self.fetchDocument().whenComplete { result in
            self.fetching.store(false, ordering: .relaxed)
            switch result {
            case .success(let document):
                self.use(document)
            case .failure(let error):
                self.failed("\(error)")
            }
        }
    }

    /// The JWK Set: from the URL, or from the `jwks_uri` of the issuer's metadata.
    private func fetchDocument() -> EventLoopFuture<KeySetHTTPClient.Document> {
        let configuration = self.identity.configuration
        guard let url = URLComponents(string: configuration.url) else {
            return self.eventLoop.makeFailedFuture(KeySetHTTPClient.Failure(description: "the URL does not parse"))
        }
        switch configuration.kind {
        case .jwks:
            return self.client.get(url, on: self.eventLoop, logger: self.logger)
        case .discovery:
            return self.metadata(issuer: configuration.url).flatMap { jwksURI in
                self.client.get(jwksURI, on: self.eventLoop, logger: self.logger)
            }
        }
    }

    /// OpenID Connect Discovery's `/.well-known/openid-configuration` under the issuer; when that is not found,
    /// RFC 8414's `/.well-known/oauth-authorization-server` inserted before the issuer's path. Either document's
    /// `issuer` must be the configured issuer exactly (OpenID Connect Discovery §4.3, RFC 8414 §3.3): a document
    /// naming another issuer could hand out any key set.
    private func metadata(issuer: String) -> EventLoopFuture<URLComponents> {
        let trimmed = issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer
        var rfc8414 = URLComponents(string: trimmed)
        let path = rfc8414?.percentEncodedPath ?? ""
        rfc8414?.percentEncodedPath = "/.well-known/oauth-authorization-server" + path
        guard let openID = URLComponents(string: trimmed + "/.well-known/openid-configuration"), let rfc8414 else {
            return self.eventLoop.makeFailedFuture(KeySetHTTPClient.Failure(description: "the issuer URL does not parse"))
        }
        return self.client.get(openID, on: self.eventLoop, logger: self.logger)
            .flatMapError { error in
                guard let failure = error as? KeySetHTTPClient.Failure, failure.status != nil else {
                    return self.eventLoop.makeFailedFuture(error)
                }
                return self.client.get(rfc8414, on: self.eventLoop, logger: self.logger)
            }
            .flatMapThrowing { document in
                try Self.jwksURI(metadata: document.body, issuer: issuer)
            }
    }

    static func jwksURI(metadata: [UInt8], issuer: String) throws -> URLComponents {
        func fail(_ message: String) -> KeySetHTTPClient.Failure {
            KeySetHTTPClient.Failure(description: "provider metadata: \(message)")
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(metadata)) as? [String: Any] else {
            throw fail("not a JSON object")
        }
        guard let named = object["issuer"] as? String else { throw fail("no issuer") }
        guard named == issuer else {
            throw fail("names issuer \(named.prefix(200)), not \(issuer): refused")
        }
        guard let text = object["jwks_uri"] as? String, text.utf8.count <= 2048, let uri = URLComponents(string: text),
            uri.scheme == "https", uri.host?.isEmpty == false, uri.user == nil, uri.password == nil
        else {
            throw fail("jwks_uri is missing or not an https URL")
        }
        return uri
    }

    private func use(_ document: KeySetHTTPClient.Document) {
        let now = self.now()
        let set: FetchedKeySet
        do {
            set = try FetchedKeySet(jwks: document.body, algorithm: self.identity.algorithm, allowed: self.identity.allowed)
        } catch {
            self.failed("\(error)")
            return
        }
        guard let keys = set.keys else {
            self.logSkipped(set.skipped)
            self.failed("no usable key in the set")
            return
        }
        let maxAge = CacheControlMaxAge.seconds(document.cacheControl)
        let lifetime = self.state.withLockedValue { $0.schedule.lifetime(maxAgeSeconds: maxAge) }
        let (changed, onChange) = self.state.withLockedValue { state -> (Bool, (@Sendable () -> Void)?) in
            guard !state.stopped else { return (false, nil) }
            let step = state.schedule.succeeded(now: now, maxAgeSeconds: maxAge)
            self.schedule(&state, at: step.nextFetch, now: now)
            let changed = state.keys == nil || state.lastDocument != document.body
            state.keys = keys
            state.lastDocument = document.body
            return (changed, state.onChange)
        }
        self.metrics.lastSuccess.record(now / 1000)
        self.metrics.age.record(0)
        self.metrics.keys.record(keys.count)
        guard changed else { return }
        self.logSkipped(set.skipped)
        self.logger.notice(
            "key set fetched",
            metadata: [
                "source": "\(self.label)",
                "kids": "\(keys.keyIDs.map { $0 ?? "-" }.joined(separator: ","))",
                "lifetime_s": "\(lifetime / 1000)",
            ]
        )
        onChange?()
    }

    private func failed(_ cause: String) {
        let now = self.now()
        self.metrics.failures.increment()
        let (dropped, hadKeys, onChange) = self.state.withLockedValue { state -> (Bool, Bool, (@Sendable () -> Void)?) in
            guard !state.stopped else { return (false, false, nil) }
            let step = state.schedule.failed(now: now)
            self.schedule(&state, at: step.nextFetch, now: now)
            let hadKeys = state.keys != nil
            if step.dropKeys {
                state.keys = nil
                state.lastDocument = nil
            }
            return (step.dropKeys && hadKeys, hadKeys, state.onChange)
        }
        self.logger.warning(
            "key set fetch failed",
            metadata: [
                "source": "\(self.label)", "error": "\(cause)",
                "keeping": "\(hadKeys && !dropped ? "the last good set" : "no keys")",
            ]
        )
        if dropped {
            self.metrics.keys.record(0)
            self.logger.error(
                "key set dropped: no good fetch within its lifetime and max_stale; its tokens get 503",
                metadata: ["source": "\(self.label)"])
            onChange?()
        }
    }

    private func schedule(_ state: inout State, at time: Int64, now: Int64) {
        state.timer?.cancel()
        let delay = TimeAmount.milliseconds(max(time - now, 0))
        state.timer = self.eventLoop.scheduleTask(in: delay) { [weak self] in self?.fetch() }
    }

    private func logSkipped(_ skipped: [FetchedKeySet.SkippedKey]) {
        for key in skipped {
            self.logger.warning(
                "key set: key skipped",
                metadata: ["source": "\(self.label)", "kid": "\(key.keyID ?? "-")", "index": "\(key.index)", "reason": "\(key.reason)"]
            )
        }
    }

    private func recordAge() {
        let fetchedAt = self.state.withLockedValue { $0.keys == nil ? nil : $0.schedule.fetchedAt }
        if let fetchedAt {
            self.metrics.age.record((self.now() - fetchedAt) / 1000)
        }
    }
}
