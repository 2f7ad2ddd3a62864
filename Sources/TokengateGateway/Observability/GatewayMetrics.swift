//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CoreMetrics
import Prometheus
import TokengateTokens
import TokengateHTTP

/// The gateway's Prometheus metrics, through swift-metrics with the swift-prometheus factory.
///
/// Every metric object a request touches is created once, at start, and kept in arrays and dictionaries
/// built then: recording is an atomic add (counters) or one short uncontended lock inside the histogram
/// (swift-prometheus guards its buckets with one); no metric is looked up by label and nothing is
/// allocated per request.
public final class GatewayMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory

    /// Per route: `[method class][status class]` request counters, rejections by reason, latency.
    let routes: [RouteMetrics]
    /// Per upstream, indexed like ``GatewayRuntime/upstreams``.
    let upstreams: [UpstreamMetrics]
    let tlsHandshakes: CoreMetrics.Counter
    let tlsFailures: [String: CoreMetrics.Counter]
    let tlsFailuresOther: CoreMetrics.Counter
    public let cutoffGeneration: CoreMetrics.Gauge
    public let cutoffLastSync: CoreMetrics.Gauge
    public let cutoffLag: CoreMetrics.Gauge
    /// Enforced cutoffs more than 300 s ahead of now (a store's clock ahead, a time in milliseconds): they reject
    /// even the user's new tokens. Recorded at each scrape from the sync service.
    public let cutoffFutureCutoffs: CoreMetrics.Gauge
    public let configGeneration: CoreMetrics.Gauge
    /// Bytes of `limits.token_body_memory` held by bodies being read for a token.
    let tokenBodyMemory: CoreMetrics.Gauge
    public let configReloads: CoreMetrics.Counter
    public let configReloadFailures: CoreMetrics.Counter
    /// Rate-limit buckets dropped to keep within `rate_limits.max_keys` while they still held less than a full
    /// bucket (``BucketTable``): a flood of distinct keys.
    let rateLimitEvictions: CoreMetrics.Counter
    /// Answers given before a route matched, by reason (see ``recordUnrouted(reason:)``).
    let unrouted: [String: CoreMetrics.Counter]
    let unroutedOther: CoreMetrics.Counter

    /// Reason codes the gateway answers with, besides the token ones.
    static let gatewayReasons = [
        "no_token", "token_in_url", "multiple_tokens", "malformed_authorization", "malformed_body", "cross_site_cookie",
        "no_route", "malformed_http", "headers_too_large", "uri_too_long", "body_too_large", "upstream_timeout",
        "upstream_connect_failed", "no_upstream_available", "upstream_closed", "upstream_malformed_response",
        "upstream_aborted", "shutting_down", "drain_timeout", "body_too_slow", "token_body_memory_full", "ambiguous_path", "method_not_allowed", "cross_site_token_page",
        "misdirected_request",
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
    /// that went away or stopped reading. Counted in `requests_total` by status, never as rejections.
    static let notRejections: Set<String> = ["-", "client_closed", "client_stalled"]

    /// The reasons a request is answered for before it has a route: no route matched, or the request (its head,
    /// target or framing) was refused as it was read. Any other reason is counted as `other`.
    static let unroutedReasons = [
        "no_route", "malformed_http", "headers_too_large", "uri_too_long", "body_too_large", "tls_required",
        "method_not_allowed", "misdirected_request",
    ]

    static let tlsReasons = [
        "handshakeFailed", "handshakeTimeout", "uncleanShutdown", "readFailed", "writeFailed", "plainHTTP", "proxyProtocol",
    ]

    struct RouteMetrics: Sendable {
        let requests: [[CoreMetrics.Counter]]
        let rejections: [String: CoreMetrics.Counter]
        let rejectionsOther: CoreMetrics.Counter
        let latency: CoreMetrics.Timer
    }

    struct UpstreamMetrics: Sendable {
        let latency: CoreMetrics.Timer
        let connectFailures: CoreMetrics.Counter
    }

    init(routeNames: [String], upstreamNames: [String], registry: PrometheusCollectorRegistry = .init()) {
        self.registry = registry
        let factory = PrometheusMetricsFactory(registry: registry)
        self.factory = factory
        let reasons = RejectionReason.all.map(\.code) + Self.gatewayReasons
        self.routes = routeNames.map { route in
            RouteMetrics(
                requests: ["safe", "unsafe"].map { methodClass in
                    ["1xx", "2xx", "3xx", "4xx", "5xx"].map { status in
                        CoreMetrics.Counter(
                            label: "tokengate_requests_total",
                            dimensions: [("route", route), ("method_class", methodClass), ("status", status)],
                            factory: factory
                        )
                    }
                },
                rejections: Dictionary(
                    uniqueKeysWithValues: reasons.map { reason in
                        (
                            reason,
                            CoreMetrics.Counter(
                                label: "tokengate_rejections_total",
                                dimensions: [("route", route), ("reason", reason)],
                                factory: factory
                            )
                        )
                    }
                ),
                rejectionsOther: CoreMetrics.Counter(
                    label: "tokengate_rejections_total", dimensions: [("route", route), ("reason", "other")],
                    factory: factory),
                latency: CoreMetrics.Timer(label: "tokengate_request_duration_seconds", dimensions: [("route", route)], factory: factory)
            )
        }
        self.upstreams = upstreamNames.map { upstream in
            UpstreamMetrics(
                latency: CoreMetrics.Timer(label: "tokengate_upstream_duration_seconds", dimensions: [("upstream", upstream)], factory: factory),
                connectFailures: CoreMetrics.Counter(
                    label: "tokengate_upstream_connect_failures_total",
                    dimensions: [("upstream", upstream)],
                    factory: factory
                )
            )
        }
        self.tlsHandshakes = CoreMetrics.Counter(label: "tokengate_tls_handshakes_total", factory: factory)
        self.tlsFailures = Dictionary(
            uniqueKeysWithValues: Self.tlsReasons.map {
                ($0, CoreMetrics.Counter(label: "tokengate_tls_failures_total", dimensions: [("reason", $0)], factory: factory))
            }
        )
        self.tlsFailuresOther = CoreMetrics.Counter(label: "tokengate_tls_failures_total", dimensions: [("reason", "other")], factory: factory)
        self.cutoffGeneration = CoreMetrics.Gauge(label: "tokengate_cutoff_snapshot_generation", factory: factory)
        self.cutoffLastSync = CoreMetrics.Gauge(label: "tokengate_cutoff_last_sync_timestamp_seconds", factory: factory)
        self.cutoffLag = CoreMetrics.Gauge(label: "tokengate_cutoff_sync_lag_seconds", factory: factory)
        self.cutoffFutureCutoffs = CoreMetrics.Gauge(label: "tokengate_cutoff_future_cutoffs", factory: factory)
        self.configGeneration = CoreMetrics.Gauge(label: "tokengate_config_generation", factory: factory)
        self.tokenBodyMemory = CoreMetrics.Gauge(label: "tokengate_token_body_memory_bytes", factory: factory)
        self.configReloads = CoreMetrics.Counter(label: "tokengate_config_reloads_total", factory: factory)
        self.configReloadFailures = CoreMetrics.Counter(label: "tokengate_config_reload_failures_total", factory: factory)
        self.rateLimitEvictions = CoreMetrics.Counter(label: "tokengate_rate_limit_evictions_total", factory: factory)
        self.unrouted = Dictionary(
            uniqueKeysWithValues: Self.unroutedReasons.map {
                ($0, CoreMetrics.Counter(label: "tokengate_unrouted_answers_total", dimensions: [("reason", $0)], factory: factory))
            }
        )
        self.unroutedOther = CoreMetrics.Counter(
            label: "tokengate_unrouted_answers_total", dimensions: [("reason", "other")], factory: factory)
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
        metrics.requests[unsafeMethod ? 1 : 0][statusClass].increment()
        if status >= 400, statusIsTheGateways, !Self.notRejections.contains(reason) {
            // A reason missing from the list is still a rejection: counted as `other` rather than not at all.
            (metrics.rejections[reason] ?? metrics.rejectionsOther).increment()
        }
        metrics.latency.recordNanoseconds(nanoseconds)
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
        self.registry.emitToString()
    }
}
