//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateHTTP

/// `tokengate_upstream_target_healthy{upstream, target}`: 1 while a target of an upstream with `health_check`
/// passes its checks (or has not failed enough of them yet), 0 while it is out of the rotation. Written at each
/// scrape from the generation serving, like ``CertificateExpiryMetric``: a reload that removes a target or a
/// health check removes its series, where a gauge kept in the registry would report it forever.
enum UpstreamHealthMetric {
    static let name = "tokengate_upstream_target_healthy"

    static func exposition(_ health: [UpstreamTargetHealth?]) -> String {
        let checked = health.compactMap { $0 }
        guard !checked.isEmpty else { return "" }
        var text = "# HELP \(Self.name) Whether a target passes its upstream's active health checks (1) or is out of the rotation (0).\n"
        text += "# TYPE \(Self.name) gauge\n"
        for upstream in checked {
            for report in upstream.snapshot {
                text += "\(Self.name){upstream=\"\(CertificateExpiryMetric.escaped(upstream.upstream))\","
                    + "target=\"\(CertificateExpiryMetric.escaped(report.target))\"} \(report.healthy ? 1 : 0)\n"
            }
        }
        return text
    }

    /// `GET /upstreams` of the admin listener: every upstream (configuration order is by name) with its targets,
    /// and for a checked one each target's health, its last check and the results in a row.
    static func json(upstreams: [UpstreamSettings], health: [UpstreamTargetHealth?]) -> String {
        var items: [String] = []
        for (index, upstream) in upstreams.enumerated() {
            let reports = index < health.count ? health[index]?.snapshot : nil
            var targets: [String] = []
            for (targetIndex, target) in upstream.targets.enumerated() {
                var item = "{\"target\":\(JSONString.quote(target.display))"
                if let report = reports?[targetIndex] {
                    item += ",\"healthy\":\(report.healthy)"
                    item += ",\"last_check\":\(report.lastResult.map(JSONString.quote) ?? "null")"
                    item += ",\"last_check_passed\":\(report.lastPassed.map { "\($0)" } ?? "null")"
                    item += ",\"successes_in_a_row\":\(report.successesInARow),\"failures_in_a_row\":\(report.failuresInARow)"
                }
                targets.append(item + "}")
            }
            var entry = "{\"name\":\(JSONString.quote(upstream.name)),\"health_check\":"
            if let check = upstream.healthCheck {
                entry += "{\"path\":\(JSONString.quote(check.path)),\"interval_ms\":\(Self.milliseconds(check.interval))"
                    + ",\"timeout_ms\":\(Self.milliseconds(check.timeout))}"
            } else {
                entry += "null"
            }
            items.append(entry + ",\"targets\":[\(targets.joined(separator: ","))]}")
        }
        return "{\"upstreams\":[\(items.joined(separator: ","))]}"
    }

    private static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
