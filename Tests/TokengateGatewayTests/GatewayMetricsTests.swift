//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing
import TokengateTokens

@testable import TokengateGateway

/// Every refusal is counted somewhere: by its reason when the list of reasons has it, else as `other`. Before, a
/// reason missing from the list (all the token page's) was not counted at all.
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
        #expect(text.contains(#"tokengate_rejections_total{route="/token",reason="upstream_aborted"} 0"#), "\(text)")
        #expect(text.contains(#"tokengate_requests_total{route="/token",method_class="safe",status="5xx"} 2"#), "\(text)")
        #expect(text.contains(#"tokengate_unrouted_answers_total{reason="other"} 0"#), "\(text)")
        #expect(!text.contains(#"reason="token_page_login_required""#))
    }
}
