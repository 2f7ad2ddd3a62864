//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import TokengateHTTP

/// The memory all requests together hold in bodies read to find a form or JSON token (`limits.token_body_memory`).
///
/// Such a body is read whole before anything is forwarded, up to `limits.max_token_body_bytes` each, and no token
/// is needed to make the gateway read one: a request without a header or cookie token on a route with a `form:`
/// or `json:` source is one. Each body alone is bounded, but over HTTP/2 every stream of every connection may
/// hold one (100 streams of 64 KiB is 6.4 MiB a connection), which let a few thousand connections take
/// gigabytes. Bytes are taken here as they arrive and given back when the exchange ends; a body that does not
/// fit gets `503` and its connection is closed, and the process's memory stays bounded.
///
/// One for the whole process (``GatewayServer`` hands it to every configuration generation): a budget per
/// generation would let every reload add a fresh one while the old generation's bodies are still held.
final class TokenBodyMemory: Sendable {
    private let maximum: ManagedAtomic<Int>
    private let used = ManagedAtomic<Int>(0)

    init(limit: Int) {
        self.maximum = ManagedAtomic(limit)
    }

    /// `limits.token_body_memory`; a reload sets it. Lowering it frees nothing: bodies already held stay, and
    /// new ones are refused until they fit.
    var limit: Int {
        get { self.maximum.load(ordering: .relaxed) }
        set { self.maximum.store(newValue, ordering: .relaxed) }
    }

    /// Takes `bytes` if they fit under the limit, and says whether they did.
    func take(_ bytes: Int) -> Bool {
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
    func giveBack(_ bytes: Int) {
        self.used.wrappingDecrement(by: bytes, ordering: .relaxed)
    }

    /// The bytes held now (metrics and tests).
    var inUse: Int { self.used.load(ordering: .relaxed) }
}
