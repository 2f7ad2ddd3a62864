//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOPosix
import TokengateTLS

/// The buffer that the HTTP/1.1 connections of one thread serialize their responses into, lent from one
/// response to the next (``ScratchBuffer``). A response's bytes leave as one buffer; the TLS handler encrypts
/// them at the flush, straight from that buffer, and lets it go, so the next response (on this connection or
/// another one of the thread) writes into the same memory. An idle connection holds none.
final class HTTP1ResponseBuffers {
    var output = ScratchBuffer()

    nonisolated(unsafe) private static let perThread = ThreadSpecificVariable<HTTP1ResponseBuffers>()

    /// The calling thread's buffers.
    static var current: HTTP1ResponseBuffers {
        Self.perThread.currentOrMake(HTTP1ResponseBuffers.init)
    }
}

@available(*, unavailable)
extension HTTP1ResponseBuffers: Sendable {}
