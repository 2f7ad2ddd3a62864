//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The plaintext and ciphertext buffers that the TLS connections of one thread lend each other
/// (``PerThreadScratchBuffer``): a read batch's decrypted records go to the handler above in `plaintext`, a
/// flush's records to the socket in `ciphertext`. An idle connection holds neither.
enum TLSScratchBuffers {
    static let plaintext = PerThreadScratchBuffer()
    static let ciphertext = PerThreadScratchBuffer()
}
