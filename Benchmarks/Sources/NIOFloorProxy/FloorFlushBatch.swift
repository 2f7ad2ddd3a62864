//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Flushes the upstream channels written during one event-loop tick together, at the end of the tick.
///
/// The floor keeps the one scheduling choice of the gateway that the side-by-side benchmark showed to matter
/// (docs/performance.md, "Choices the figures rest on"): a flush per request wakes the backend, which shares the proxy's core, in the
/// middle of the proxy's batch. Without it the floor would measure a worse proxy than the gateway, not a
/// cheaper one.
final class FloorFlushBatch {
    private let eventLoop: any EventLoop
    private var pending: [any Channel] = []
    private var scheduled = false

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.pending.reserveCapacity(64)
    }

    /// Flushes `channel` once the current tick's I/O is handled. Call on the loop.
    func add(_ channel: any Channel) {
        self.pending.append(channel)
        if !self.scheduled {
            self.scheduled = true
            self.eventLoop.assumeIsolatedUnsafeUnchecked().execute { self.run() }
        }
    }

    private func run() {
        for channel in self.pending { channel.flush() }
        self.pending.removeAll(keepingCapacity: true)
        self.scheduled = false
    }
}
