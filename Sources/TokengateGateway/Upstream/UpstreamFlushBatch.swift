//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// Flushes an event loop's upstream connections once per loop tick, after the loop has handled every
/// client read of that tick, instead of once per client read.
///
/// ### Why
/// Each flush to a backend is a `write` that wakes the backend's process. Flushed as each request is read,
/// a tick that read 20 requests woke the backend up to 20 times, and where the backend shares a core with
/// the gateway (the side-by-side benchmark; a sidecar; a small VM) every wake-up preempted the gateway in
/// the middle of its batch: 0.85 context switches per request each way. Flushed together at the end of the
/// tick, the writes leave back to back and the backend finds several requests per wake-up (0.55 per
/// request), which is what HAProxy does by running its sends after its event processing. The added
/// latency is the rest of the tick's processing, which the request would otherwise have spent waiting for
/// the preempted gateway anyway.
///
/// ### How
/// ``UpstreamResponseHandler/flush()`` registers its handler here at most once per tick; the first
/// registration of a tick enqueues one task with `EventLoop.execute`, which NIO runs right after the I/O
/// events of the current tick (on the loop, without waking the selector). Only that task's closure is
/// allocated, once per tick and not per request. A handler whose channel closed before the task runs is
/// skipped by its own `flushNow()`.
final class UpstreamFlushBatch {
    private let eventLoop: any EventLoop
    /// Handlers with writes waiting for the end of the tick, in the order they asked.
    private var pending: [UpstreamResponseHandler] = []
    private var scheduled = false

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
        self.pending.reserveCapacity(64)
    }

    /// Flushes `handler` at the end of the current tick. Call on the loop, at most once per handler per
    /// tick (the handler keeps track).
    func add(_ handler: UpstreamResponseHandler) {
        self.eventLoop.assertInEventLoop()
        self.pending.append(handler)
        if !self.scheduled {
            self.scheduled = true
            self.eventLoop.assumeIsolatedUnsafeUnchecked().execute { self.run() }
        }
    }

    /// A flush can fail a write and close a channel at once, and what that close sets off may send another
    /// request and register another handler: the loop below reads `pending` by index, so such a late
    /// registration is flushed in this same pass.
    private func run() {
        var index = 0
        while index < self.pending.count {
            let handler = self.pending[index]
            index += 1
            handler.flushNow()
        }
        self.pending.removeAll(keepingCapacity: true)
        self.scheduled = false
    }
}

@available(*, unavailable)
extension UpstreamFlushBatch: Sendable {}
