//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// How the load is applied and when it stops.
struct LoadPlan: Sendable {
    enum Mode: Sendable {
        /// Each connection sends its next request as soon as the previous answer is in.
        case closedLoop
        /// Open loop at a fixed total rate. Each request has an intended send time; latency is measured from
        /// that time, so a stalled server is charged for the requests it delayed (no coordinated omission).
        case fixedRate(perSecond: Double)
    }

    /// The wire protocol: HTTP/1.1 keep-alive, or HTTP/2 (ALPN `h2`, libnghttp2 client sessions).
    enum WireProtocol: String, Sendable {
        case http1 = "1.1"
        case http2 = "2"

        /// The ALPN protocol the bench offers and requires.
        var alpn: String {
            switch self {
            case .http1: "http/1.1"
            case .http2: "h2"
            }
        }
    }

    let mode: Mode
    let wireProtocol: WireProtocol
    let connections: Int
    /// Requests in flight per connection at most: 1 on HTTP/1.1, the concurrent streams on HTTP/2.
    let streams: Int
    let threads: Int
    /// Stop sending after this long (from the common start).
    let duration: TimeAmount?
    /// Stop after this many requests in total (split evenly across connections).
    let requests: Int?
    /// After the load stops, how long answers still in flight are waited for before they count as errors.
    let grace: TimeAmount
    /// The hard stop for a run bounded by count only.
    let maxTime: TimeAmount
    let connectTimeout: TimeAmount

    /// The number of requests connection `index` may send.
    func budget(forConnection index: Int) -> Int {
        guard let requests = self.requests else { return Int.max }
        return requests / self.connections + (index < requests % self.connections ? 1 : 0)
    }

    var modeName: String {
        switch self.mode {
        case .closedLoop: "closed-loop"
        case .fixedRate: "fixed-rate"
        }
    }

    var rate: Double? {
        switch self.mode {
        case .closedLoop: nil
        case .fixedRate(let perSecond): perSecond
        }
    }
}
