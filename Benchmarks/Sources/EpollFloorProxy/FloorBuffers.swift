//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTLS

/// The two scratch buffers every connection of the loop borrows — one for the bytes of a socket read, one for
/// decrypted plaintext — because a handler runs to its end before the next one starts: a read allocates nothing
/// while nobody keeps the previous one's bytes. One instance per loop, used on the loop's thread only.
final class FloorBuffers {
    var read = ScratchBuffer()
    var plaintext = ScratchBuffer()
}
