//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateTokens

@testable import TokengateGateway

/// Every refusal is counted somewhere: by its reason when the list of reasons has it, else as `other`. Before, a
/// reason missing from the list (all the token page's) was not counted at all. And the exposition follows the
/// Prometheus conventions: help and type for every family, series bounded, buckets fine enough for a proxy.
@Suite struct GatewayMetricsTests {
    @Test func everyRefusalIsCountedByItsReasonOrAsOther() {
        let metrics = GatewayMetrics(routeNames: ["/token"], upstreamNames: [])
        for refusal in TokenPageCodeKey.Refusal.allCases {
            metrics.recordRequest(
                route: 0, unsafeMethod: true, status: 400, reason: "token_page_redeem_" + refusal.rawValue, nanoseconds: 1)
        }
        metrics.recordRequest(route: 0, unsafeMethod: true, status: 400, reason: "token_page_redeem_reused", nanoseconds: 1)
        metrics.recordRequest(route: 0, unsafeMethod: true, status: 503, reason: "token_page_redeem_busy", nanoseconds: 1)
        metrics.recordRequest(route: 0, unsafeMethod: false, status: 502, reason: "token_page_whoami_failed", nanoseconds: 1)
        metrics.recordRequest(route: 0, unsafeMethod: false, status: 400, reason: "a_reason_nobody_listed", nanoseconds: 1)
        // Nor is an error the gateway did not decide: the backend's (`-`), a client gone or stalled.
        for reason in ["-", "client_closed", "client_stalled"] {
            metrics.recordRequest(route: 0, unsafeMethod: false, status: 499, reason: reason, nanoseconds: 1)
            metrics.recordRequest(route: nil, unsafeMethod: false, status: 499, reason: reason, nanoseconds: 1)
        }
        // Nor a backend's status whose response the gateway then cut: its head was the client's already.
        metrics.recordRequest(
            route: 0, unsafeMethod: false, status: 500, reason: "upstream_aborted", nanoseconds: 1, statusIsTheGateways: false)
        // A 2xx or 3xx is not a rejection, whatever its reason code.
        metrics.recordRequest(route: 0, unsafeMethod: false, status: 302, reason: "token_page_login_required", nanoseconds: 1)
        let text = metrics.render()
        for refusal in TokenPageCodeKey.Refusal.allCases {
            #expect(text.contains(#"tokengate_rejections_total{route="/token",reason="token_page_redeem_\#(refusal.rawValue)"} 1"#))
        }
        #expect(text.contains(#"tokengate_rejections_total{route="/token",reason="token_page_whoami_failed"} 1"#))
        #expect(text.contains(#"tokengate_rejections_total{route="/token",reason="token_page_redeem_reused"} 1"#))
        #expect(text.contains(#"tokengate_rejections_total{route="/token",reason="token_page_redeem_busy"} 1"#))
        #expect(text.contains(#"tokengate_rejections_total{route="/token",reason="other"} 1"#), "\(text)")
        #expect(!text.contains("a_reason_nobody_listed"))
        #expect(!text.contains(#"reason="upstream_aborted""#), "not counted, so no series: \(text)")
        #expect(text.contains(#"tokengate_requests_total{route="/token",method_class="safe",status="5xx"} 2"#), "\(text)")
        #expect(text.contains(#"tokengate_unrouted_answers_total{reason="other"} 0"#), "\(text)")
        #expect(!text.contains(#"reason="token_page_login_required""#))
    }

    /// Every family has its `# HELP` and `# TYPE` (through swift-metrics' factory every `# HELP` was lost).
    @Test func everyFamilyHasHelpAndType() {
        let metrics = GatewayMetrics(routeNames: ["/api/"], upstreamNames: ["api"])
        metrics.recordRequest(route: 0, unsafeMethod: false, status: 401, reason: "no_token", nanoseconds: 1_000)
        var families: [String: Set<String>] = [:]
        var sampleNames: Set<String> = []
        for line in metrics.render().split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 3)
            if line.hasPrefix("# "), parts.count == 4 {
                families[String(parts[2]), default: []].insert(String(parts[1]))
            } else if let name = line.split(whereSeparator: { $0 == "{" || $0 == " " }).first {
                sampleNames.insert(String(name))
            }
        }
        #expect(families.count >= 15, "\(families.keys.sorted())")
        for (family, kinds) in families {
            #expect(kinds == ["HELP", "TYPE"], "\(family): \(kinds)")
        }
        for name in sampleNames {
            let family = ["_bucket", "_sum", "_count"].first { name.hasSuffix($0) && families[String(name.dropLast($0.count))] != nil }
                .map { String(name.dropLast($0.count)) } ?? name
            #expect(families[family] != nil, "\(name) has no # HELP / # TYPE")
        }
    }

    /// A series is made when it first counts, never up front, and the rejection series are capped: past the cap
    /// a new pair counts under its route's `other`, and a reason nobody listed never gets a series of its own.
    @Test func rejectionSeriesAreMadeOnFirstUseAndCapped() {
        let registry = MetricsRegistry(maxRejectionSeries: 2)
        let metrics = GatewayMetrics(routeNames: ["/a/", "/b/"], upstreamNames: [], registry: registry)
        #expect(!metrics.render().contains("tokengate_rejections_total"), "nothing counted, no series")
        #expect(!metrics.render().contains("tokengate_requests_total"))
        for reason in ["no_token", "expired", "bad_signature", "no_token"] {
            metrics.recordRequest(route: 0, unsafeMethod: false, status: 401, reason: reason, nanoseconds: 1)
        }
        metrics.recordRequest(route: 1, unsafeMethod: false, status: 401, reason: "expired", nanoseconds: 1)
        for index in 0..<50 {
            metrics.recordRequest(route: 1, unsafeMethod: false, status: 400, reason: "made_up_\(index)", nanoseconds: 1)
        }
        let text = metrics.render()
        #expect(text.contains(#"tokengate_rejections_total{route="/a/",reason="no_token"} 2"#), "\(text)")
        #expect(text.contains(#"tokengate_rejections_total{route="/a/",reason="expired"} 1"#), "\(text)")
        #expect(text.contains(#"tokengate_rejections_total{route="/a/",reason="other"} 1"#), "over the cap: \(text)")
        #expect(text.contains(#"tokengate_rejections_total{route="/b/",reason="other"} 51"#), "\(text)")
        #expect(!text.contains("bad_signature") && !text.contains("made_up"), "\(text)")
        let rejectionSeries = text.split(separator: "\n").filter { $0.hasPrefix("tokengate_rejections_total{") }
        #expect(rejectionSeries.count == 4, "2 within the cap and one other per route: \(rejectionSeries)")

        // A reload's metrics share the registry: its series go on counting, and the cap holds across both.
        let reloaded = GatewayMetrics(routeNames: ["/a/", "/b/"], upstreamNames: [], registry: registry)
        reloaded.recordRequest(route: 0, unsafeMethod: false, status: 401, reason: "no_token", nanoseconds: 1)
        reloaded.recordRequest(route: 1, unsafeMethod: false, status: 401, reason: "bad_signature", nanoseconds: 1)
        let after = reloaded.render()
        #expect(after.contains(#"tokengate_rejections_total{route="/a/",reason="no_token"} 3"#), "\(after)")
        #expect(after.contains(#"tokengate_rejections_total{route="/b/",reason="other"} 52"#), "\(after)")
    }

    /// A proxy's answers take microseconds to a few milliseconds: the latency buckets go below a millisecond,
    /// where the library's default (5 ms and up) put every request in its first bucket.
    @Test func latencyBucketsResolveSubMillisecondRequests() {
        let metrics = GatewayMetrics(routeNames: ["/"], upstreamNames: [])
        metrics.recordRequest(route: 0, unsafeMethod: false, status: 200, reason: "-", nanoseconds: 80_000)
        metrics.recordRequest(route: 0, unsafeMethod: false, status: 200, reason: "-", nanoseconds: 700_000)
        let text = metrics.render()
        #expect(text.contains(#"tokengate_request_duration_seconds_bucket{route="/",le="0.00005"} 0"#), "\(text)")
        #expect(text.contains(#"tokengate_request_duration_seconds_bucket{route="/",le="0.0001"} 1"#), "\(text)")
        #expect(text.contains(#"tokengate_request_duration_seconds_bucket{route="/",le="0.0005"} 1"#), "\(text)")
        #expect(text.contains(#"tokengate_request_duration_seconds_bucket{route="/",le="0.001"} 2"#), "\(text)")
    }
}
