//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTLS
import TokengateHTTP

/// The buffer that the client connections of one thread write their output into, lent from one write to
/// the next (``PerThreadScratchBuffer``): an HTTP/1.1 response, or a round of HTTP/2 frames. The output leaves
/// as one buffer; the TLS handler encrypts it at the flush, straight from that buffer, and lets it go, so the
/// next output (on this connection or another one of the thread) goes into the same memory. An idle
/// connection holds none.
enum ClientOutputBuffers {
    static let output = PerThreadScratchBuffer()
}
