//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOPosix

/// The plaintext and ciphertext buffers that the TLS connections of one thread lend each other
/// (``ScratchBuffer``): a read batch's decrypted records go to the handler above in `plaintext`, a flush's
/// records to the socket in `ciphertext`. An idle connection holds neither.
final class TLSScratchBuffers {
    var plaintext = ScratchBuffer()
    var ciphertext = ScratchBuffer()

    nonisolated(unsafe) private static let perThread = ThreadSpecificVariable<TLSScratchBuffers>()

    /// The calling thread's buffers.
    static var current: TLSScratchBuffers {
        Self.perThread.currentOrMake(TLSScratchBuffers.init)
    }
}

@available(*, unavailable)
extension TLSScratchBuffers: Sendable {}
