//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Synchronization

/// The response bytes all client connections together may buffer for their clients beyond what each buffers
/// anyway (`limits.response_buffer_total`), handed out in grants of up to `limits.response_buffer_per_connection`.
///
/// A client that reads slowly keeps the backend's response waiting in the gateway. Each connection buffers a
/// little of it in any case (NIO's 64 KiB write-buffer mark over HTTP/1.1, the stream's 64 KiB over HTTP/2);
/// past that the exchange stopped reading the backend, and the backend connection stayed out of its pool for as
/// long as the client took, so a few hundred trickle readers took every connection to an upstream. With a
/// grant the codec goes on taking the response (nginx's proxy buffering, in memory), so a response that fits
/// is read to its end and the backend connection goes back to the pool at once; the grant comes back when the
/// client has taken the bytes. A connection that finds the budget spent keeps the old backpressure, and the
/// send rate rule (``ResponseSendPace``) bounds how long it may hold the backend.
///
/// One for the whole process, shared by every event loop (an atomic; taken only when a client falls behind,
/// never on the common path) and across reloads, like the token body memory.
package final class ResponseBufferBudget: Sendable {
    private let maximum: Atomic<Int>
    private let used = Atomic<Int>(0)

    package init(limit: Int) {
        self.maximum = Atomic(limit)
    }

    /// `limits.response_buffer_total`; a reload sets it. Lowering it frees nothing: grants already made stay,
    /// and new ones wait until they fit.
    package var limit: Int {
        get { self.maximum.load(ordering: .relaxed) }
        set { self.maximum.store(newValue, ordering: .relaxed) }
    }

    /// Takes `bytes` if they fit under the limit, and says whether they did.
    package func take(_ bytes: Int) -> Bool {
        var current = self.used.load(ordering: .relaxed)
        while true {
            guard current + bytes <= self.maximum.load(ordering: .relaxed) else { return false }
            let (exchanged, original) = self.used.compareExchange(
                expected: current,
                desired: current + bytes,
                ordering: .relaxed
            )
            if exchanged { return true }
            current = original
        }
    }

    /// Gives back `bytes` taken before.
    package func giveBack(_ bytes: Int) {
        self.used.wrappingSubtract(bytes, ordering: .relaxed)
    }

    /// The bytes granted now (metrics and tests).
    package var inUse: Int { self.used.load(ordering: .relaxed) }
}

/// By identity: a configuration that holds one (``HTTP2ServerConfiguration``) compares the budget it shares.
extension ResponseBufferBudget: Hashable {
    package static func == (lhs: ResponseBufferBudget, rhs: ResponseBufferBudget) -> Bool { lhs === rhs }
    package func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}
