//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// A prepared request in the flat form `CTokengateShims_nghttp2_submit_request` takes: every name and value
/// back to back in ``bytes``, their lengths in ``lengths``, one never-index mark per field; and the body.
///
/// Built once per token before the run, from the same HTTP/1.1 head the HTTP/1.1 path sends, so both
/// protocols carry exactly the same fields: `:method`, `:scheme`, `:authority` (from `Host`), `:path`, then the
/// other fields lowercased (HTTP/2 forbids uppercase names and nghttp2 does not fix them when sending).
/// `authorization` is never-indexed: every request carries a different token, so indexing would only churn
/// the HPACK table — and a token has no business in a compression context anyway.
struct BenchHTTP2Request: Sendable {
    private(set) var bytes: [UInt8] = []
    private(set) var lengths: [Int] = []
    private(set) var neverIndex: [UInt8] = []
    let body: ByteBuffer?

    var count: Int { self.neverIndex.count }

    /// Fields an HTTP/2 request must not carry (RFC 9113 §8.2.2), plus `host`, which becomes `:authority`.
    private static let dropped: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "host",
    ]

    init(head: HTTPRequestHead, body: ByteBuffer?) {
        self.body = body
        self.append(":method", head.method.rawValue, sensitive: false)
        self.append(":scheme", "https", sensitive: false)
        if let host = head.headers.first(name: "host") {
            self.append(":authority", host, sensitive: false)
        }
        self.append(":path", head.uri, sensitive: false)
        for (name, value) in head.headers {
            let lower = name.lowercased()
            guard !Self.dropped.contains(lower) else { continue }
            self.append(lower, value, sensitive: lower == "authorization")
        }
    }

    private mutating func append(_ name: String, _ value: String, sensitive: Bool) {
        self.bytes.append(contentsOf: name.utf8)
        self.bytes.append(contentsOf: value.utf8)
        self.lengths.append(name.utf8.count)
        self.lengths.append(value.utf8.count)
        self.neverIndex.append(sensitive ? 1 : 0)
    }
}
