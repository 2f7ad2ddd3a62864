//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import NIOCore

/// Cuts a byte stream into whole messages for both directions of a floor proxy: what a read brought is
/// joined to what an earlier read left, each whole message at the front is handed on as a slice (no copy), and
/// the rest waits for the next read.
public struct FloorMessageSplitter {
    // Inlinable (with `pending` visible to inlined code), so that the floors pay what a same-module call costs.
    @usableFromInline var pending: ByteBuffer?

    public init() {}

    /// Calls `deliver` with each whole message in `bytes` (after what was left before), where `length` says how
    /// long the message at the front of the bytes it is given is, or nil until it is whole.
    @inlinable
    public mutating func split(
        _ bytes: ByteBuffer,
        length: (ByteBuffer) -> Int?,
        deliver: (ByteBuffer) -> Void
    ) {
        var bytes = bytes
        if var pending = self.pending.take() {
            pending.writeBuffer(&bytes)
            bytes = pending
        }
        while let size = length(bytes), let message = bytes.readSlice(length: size) {
            deliver(message)
        }
        if bytes.readableBytes > 0 { self.pending = bytes }
    }
}
