//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import NIOConcurrencyHelpers
import Prometheus
import TokengateTokens
import TokengateHTTP

/// The gateway's Prometheus metrics, made on the process's ``MetricsRegistry`` with their `# HELP` texts.
///
/// A series is made the first time it has something to count, not for every label value the gateway could
/// give it: every route × reason pair up front was 276 series for 4 routes, about 93,000 at the 1,000-route
/// maximum, nearly all of them zero. The per-route request counters and latency histograms sit in lock-free
/// slots that are filled once (``ManagedAtomicLazyReference``), so a request after the first pays an atomic
/// load and an add, as before; a rejection looks its counter up under a short per-route lock. Rejection
/// series are bounded by ``MetricsRegistry/maxRejectionSeries`` and by the list of known reasons (anything
/// else is `other`), so no client can make a series.
public final class GatewayMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: MetricsRegistry
    /// The WebSocket tunnels: open now, and closed by reason.
    let webSockets: WebSocketMetrics

    /// Per route, indexed like ``GatewayRuntime/routes``.
    let routes: [RouteMetrics]
    /// Per upstream, indexed like ``GatewayRuntime/upstreams``.
    let upstreams: [UpstreamMetrics]
    let tlsHandshakes: Prometheus.Counter
    let tlsFailures: [String: Prometheus.Counter]
    let tlsFailuresOther: Prometheus.Counter
    public let cutoffGeneration: Prometheus.Gauge
    public let cutoffLastSync: Prometheus.Gauge
    public let cutoffLag: Prometheus.Gauge
    /// Enforced cutoffs more than 300 s ahead of now (a store's clock ahead, a time in milliseconds): they reject
    /// even the user's new tokens. Recorded at each scrape from the sync service.
    public let cutoffFutureCutoffs: Prometheus.Gauge
    public let configGeneration: Prometheus.Gauge
    /// Bytes of `limits.token_body_memory` held by bodies being read for a token.
    let tokenBodyMemory: Prometheus.Gauge
    public let configReloads: Prometheus.Counter
    public let configReloadFailures: Prometheus.Counter
    /// Rate-limit buckets dropped to keep within `rate_limits.max_keys` while they still held less than a full
    /// bucket (``BucketTable``): a flood of distinct keys.
    let rateLimitEvictions: Prometheus.Counter
    /// Answers given before a route matched, by reason (see ``recordUnrouted(reason:)``).
    let unrouted: [String: Prometheus.Counter]
    let unroutedOther: Prometheus.Counter
    /// The `forward_auth` listeners' checks, counted apart from proxied requests.
    let checks: ForwardAuthMetrics

    /// Reason codes the gateway answers with, besides the token ones.
    static let gatewayReasons = [
        "no_token", "token_in_url", "multiple_tokens", "malformed_authorization", "malformed_body", "cross_site_cookie",
        "no_route", "malformed_http", "headers_too_large", "uri_too_long", "body_too_large", "upstream_timeout",
        "upstream_connect_failed", "no_upstream_available", "upstream_closed", "upstream_malformed_response",
        "upstream_aborted", "shutting_down", "drain_timeout", "body_too_slow", "token_body_memory_full", "ambiguous_path", "method_not_allowed", "cross_site_token_page",
        "misdirected_request", "keys_unavailable",
        // The choice of a token's issuer on a gateway with several (``IssuerChoice``).
        "unknown_issuer", "missing_issuer", "issuer_not_accepted",
        // The traffic policy's refusals (``TrafficPolicy``).
        "ip_denied", "cors_refused", "rate_limit_client", "rate_limit_user", "rate_limit_route", "rate_limit_failed_tokens",
        "rate_limit_token_page",
        // The token page's refusals and failures (its 2xx and 3xx answers are not rejections).
        "token_page_method", "token_page_bad_query", "token_page_unknown_app", "token_page_bad_return_address",
        "token_page_ambiguous_session", "token_page_whoami_failed", "token_page_whoami_busy", "token_page_mint_failed",
        "token_page_invalid_code_challenge", "token_page_code_challenge_required", "token_page_redeem_bad_request",
        "token_page_redeem_too_large", "token_page_redeem_unknown_app", "token_page_redeem_revoked",
        "token_page_redeem_reused", "token_page_redeem_busy", "token_page_confirm_cross_site",
        "token_page_confirm_bad_origin", "token_page_confirm_bad_request", "token_page_confirm_too_large",
        "token_page_confirm_no_cookie",
    ] + TokenPageCodeKey.Refusal.allCases.map { "token_page_redeem_" + $0.rawValue }
        + TokenPageConfirmationKey.Refusal.allCases.map { "token_page_confirm_" + $0.rawValue }

    /// Error statuses the gateway did not decide: the backend's own answer (logged with reason `-`), and a client
    /// that went away, stopped reading or read too slowly. Counted in `requests_total` by status, never as rejections.
    static let notRejections: Set<String> = ["-", "client_closed", "client_stalled", "client_too_slow"]

    /// The reasons a request is answered for before it has a route: no route matched, or the request (its head,
    /// target or framing) was refused as it was read. Any other reason is counted as `other`.
    static let unroutedReasons = [
        "no_route", "malformed_http", "headers_too_large", "uri_too_long", "body_too_large", "tls_required",
        "method_not_allowed", "misdirected_request",
    ]

    static let tlsReasons = [
        "handshakeFailed", "handshakeTimeout", "uncleanShutdown", "readFailed", "writeFailed", "plainHTTP", "proxyProtocol",
    ]

    /// Every reason that may have a series of its own in `tokengate_rejections_total`.
    static let listedReasons: Set<String> = Set(RejectionReason.all.map(\.code) + GatewayMetrics.gatewayReasons)

    /// Latency buckets for a proxy: a request the gateway answers itself takes tens of microseconds, a proxied
    /// one on a local network a few hundred; the default buckets of swift-prometheus (5 ms and up) put all of
    /// them in the first.
    static let durationBuckets: [Duration] = [
        .microseconds(50), .microseconds(100), .microseconds(250), .microseconds(500),
        .milliseconds(1), .microseconds(2_500), .milliseconds(5), .milliseconds(10), .milliseconds(25),
        .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
        .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10), .seconds(30), .seconds(60),
    ]

    enum Help {
        static let requests = "Requests finished, by route, method class (safe: GET, HEAD, OPTIONS, TRACE) and status class."
        static let rejections =
            "Requests the gateway refused or failed itself, by route and reason code (not the backend's own statuses)."
        static let requestDuration = "Time from a request's head to its end (the last byte of the response), by route."
        static let upstreamDuration = "Time from sending a request to the backend to its response head, by upstream."
        static let connectFailures = "Connects to an upstream's targets that failed."
        static let tlsHandshakes = "TLS handshakes completed on the public listeners."
        static let tlsFailures =
            "TLS connections that failed, by reason (plainHTTP: plain HTTP sent to a TLS port; proxyProtocol: a missing or bad PROXY header)."
        static let cutoffGeneration = "Cutoff snapshots this process built from the store (0 before the first sync)."
        static let cutoffLastSync = "UNIX time of the last successful sync with the cutoff store (0 before the first)."
        static let cutoffLag = "Seconds since the enforced cutoff snapshot was last confirmed against the store."
        static let futureCutoffs = "Enforced cutoffs more than 300 s ahead of now (they reject even new tokens)."
        static let configGeneration = "The configuration generation serving (1 at start, +1 per successful reload)."
        static let tokenBodyMemory = "Bytes of limits.token_body_memory held by bodies being read for a token."
        static let reloads = "Successful configuration reloads."
        static let reloadFailures = "Configuration reloads refused; the previous configuration keeps serving."
        static let unrouted = "Requests answered before a route matched, by reason."
        static let rateLimitEvictions =
            "Rate-limit buckets dropped while not full to keep within rate_limits.max_keys (a flood of distinct keys)."
    }

    /// One route's series, each made on its first use.
    final class RouteMetrics: Sendable {
        let name: String
        private let registry: MetricsRegistry
        /// `[method class * 5 + status class]`.
        private let requests: [ManagedAtomicLazyReference<Prometheus.Counter>]
        private let latency = ManagedAtomicLazyReference<Prometheus.DurationHistogram>()
        private let rejections = NIOLockedValueBox<[String: Prometheus.Counter]>([:])

        private static let methodClasses = ["safe", "unsafe"]
        private static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

        init(name: String, registry: MetricsRegistry) {
            self.name = name
            self.registry = registry
            self.requests = (0..<10).map { _ in ManagedAtomicLazyReference() }
        }

        func requestCounter(unsafeMethod: Bool, statusClass: Int) -> Prometheus.Counter {
            let slot = self.requests[(unsafeMethod ? 5 : 0) + statusClass]
            if let counter = slot.load() { return counter }
            return slot.storeIfNilThenLoad(
                registry.counter("tokengate_requests_total",
                    labels: [
                        ("route", self.name), ("method_class", Self.methodClasses[unsafeMethod ? 1 : 0]),
                        ("status", Self.statusClasses[statusClass]),
                    ],
                    help: Help.requests
                )
            )
        }

        var latencyHistogram: Prometheus.DurationHistogram {
            if let histogram = self.latency.load() { return histogram }
            return self.latency.storeIfNilThenLoad(
                registry.durationHistogram("tokengate_request_duration_seconds", labels: [("route", self.name)],
                    buckets: GatewayMetrics.durationBuckets, help: Help.requestDuration
                )
            )
        }

        /// The counter for `reason`: its own when the reason is listed and the series budget allows, else the
        /// route's `other`.
        func rejectionCounter(reason: String) -> Prometheus.Counter {
            self.rejections.withLockedValue { counters in
                if let counter = counters[reason] { return counter }
                let own =
                    GatewayMetrics.listedReasons.contains(reason)
                    && self.registry.admitRejectionSeries(route: self.name, reason: reason)
                let label = own ? reason : "other"
                if let counter = counters[label] {
                    counters[reason] = counter
                    return counter
                }
                let counter = registry.counter("tokengate_rejections_total", labels: [("route", self.name), ("reason", label)],
                    help: Help.rejections
                )
                counters[label] = counter
                // An unlisted reason is not kept by its own name: a stream of distinct ones would grow the table.
                if own { counters[reason] = counter }
                return counter
            }
        }
    }

    struct UpstreamMetrics: Sendable {
        let latency: Prometheus.DurationHistogram
        let connectFailures: Prometheus.Counter
    }

    init(routeNames: [String], upstreamNames: [String], registry: MetricsRegistry = MetricsRegistry()) {
        self.registry = registry
        self.webSockets = WebSocketMetrics(registry: registry)
        self.checks = ForwardAuthMetrics(registry: registry)
        self.routes = routeNames.map { RouteMetrics(name: $0, registry: registry) }
        // Few and fixed by the configuration: made at once, so a dashboard sees every upstream from the start.
        self.upstreams = upstreamNames.map { upstream in
            UpstreamMetrics(
                latency: registry.durationHistogram("tokengate_upstream_duration_seconds", labels: [("upstream", upstream)],
                    buckets: Self.durationBuckets, help: Help.upstreamDuration
                ),
                connectFailures: registry.counter("tokengate_upstream_connect_failures_total", labels: [("upstream", upstream)],
                    help: Help.connectFailures
                )
            )
        }
        self.tlsHandshakes = registry.counter("tokengate_tls_handshakes_total", help: Help.tlsHandshakes)
        self.tlsFailures = Dictionary(
            uniqueKeysWithValues: Self.tlsReasons.map {
                ($0, registry.counter("tokengate_tls_failures_total", labels: [("reason", $0)], help: Help.tlsFailures))
            }
        )
        self.tlsFailuresOther = registry.counter("tokengate_tls_failures_total", labels: [("reason", "other")], help: Help.tlsFailures)
        self.cutoffGeneration = registry.gauge("tokengate_cutoff_snapshot_generation", help: Help.cutoffGeneration)
        self.cutoffLastSync = registry.gauge("tokengate_cutoff_last_sync_timestamp_seconds", help: Help.cutoffLastSync)
        self.cutoffLag = registry.gauge("tokengate_cutoff_sync_lag_seconds", help: Help.cutoffLag)
        self.cutoffFutureCutoffs = registry.gauge("tokengate_cutoff_future_cutoffs", help: Help.futureCutoffs)
        self.configGeneration = registry.gauge("tokengate_config_generation", help: Help.configGeneration)
        self.tokenBodyMemory = registry.gauge("tokengate_token_body_memory_bytes", help: Help.tokenBodyMemory)
        self.configReloads = registry.counter("tokengate_config_reloads_total", help: Help.reloads)
        self.configReloadFailures = registry.counter("tokengate_config_reload_failures_total", help: Help.reloadFailures)
        self.rateLimitEvictions = registry.counter("tokengate_rate_limit_evictions_total", help: Help.rateLimitEvictions)
        self.unrouted = Dictionary(
            uniqueKeysWithValues: Self.unroutedReasons.map {
                ($0, registry.counter("tokengate_unrouted_answers_total", labels: [("reason", $0)], help: Help.unrouted))
            }
        )
        self.unroutedOther = registry.counter("tokengate_unrouted_answers_total", labels: [("reason", "other")], help: Help.unrouted)
    }

    /// Records one finished request. `route` is `nil` when no route matched: the request is counted by
    /// ``recordUnrouted(reason:)`` instead.
    ///
    /// - Parameter statusIsTheGateways: `false` when the client got the backend's status (its response head was
    ///   forwarded), even if the exchange then ended badly (`upstream_aborted`, `drain_timeout` mid-response): an
    ///   error status the backend chose is not one of the gateway's rejections.
    func recordRequest(
        route: Int?, unsafeMethod: Bool, status: UInt, reason: String, nanoseconds: Int64, statusIsTheGateways: Bool = true
    ) {
        guard let route, route < self.routes.count else {
            if !Self.notRejections.contains(reason) {
                self.recordUnrouted(reason: reason)
            }
            return
        }
        let metrics = self.routes[route]
        let statusClass = min(max(Int(status / 100), 1), 5) - 1
        metrics.requestCounter(unsafeMethod: unsafeMethod, statusClass: statusClass).increment()
        if status >= 400, statusIsTheGateways, !Self.notRejections.contains(reason) {
            // A reason missing from the list is still a rejection: counted as `other` rather than not at all.
            metrics.rejectionCounter(reason: reason).increment()
        }
        metrics.latencyHistogram.recordNanoseconds(nanoseconds)
    }

    /// Counts an answer given before any route matched: by the exchange (no route, a target or `Host` it refuses),
    /// or by the protocol layer itself (a head that does not parse or is too large, an HTTP/2 stream the codec
    /// refuses). None of these reach the per-route metrics, so without this counter a route table that stopped
    /// matching after a reload, or a flood of malformed requests, would show in the logs only.
    func recordUnrouted(reason: String) {
        (self.unrouted[reason] ?? self.unroutedOther).increment()
    }

    func recordTLSFailure(_ code: String) {
        (self.tlsFailures[code] ?? self.tlsFailuresOther).increment()
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> String {
        self.registry.render()
    }
}

extension Prometheus.Gauge {
    /// Sets the gauge to a count (an `Int`, as the gateway's counts are).
    func record(_ value: Int) {
        self.record(Int64(value))
    }
}
