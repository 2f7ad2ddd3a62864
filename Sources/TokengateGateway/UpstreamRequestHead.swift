//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// A request head as the backend gets it, already serialized (``RequestRewriter/upstreamHead(from:identity:strip:newBodyLength:forwarding:allocator:)``),
/// with what the upstream connection must know to frame the body and read the response.
///
/// Kept whole for the exchange's lifetime: a retry on a fresh connection sends the same bytes again.
struct UpstreamRequestHead {
    /// Request line, fields and the empty line.
    var bytes: ByteBuffer
    var method: HTTPMethod
    /// The head says `transfer-encoding: chunked` (a body of unknown length): body parts go as chunks.
    var chunked: Bool
}
