//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics

/// The memory all requests together hold in bodies read to find a form or JSON token (`limits.token_body_memory`).
///
/// Such a body is read whole before anything is forwarded, up to `limits.max_token_body_bytes` each, and no token
/// is needed to make the gateway read one: a request without a header or cookie token on a route with a `form:`
/// or `json:` source is one. Each body alone is bounded, but over HTTP/2 every stream of every connection may
/// hold one (100 streams of 64 KiB is 6.4 MiB a connection), which let a few thousand connections take
/// gigabytes. Bytes are taken here as they arrive and given back when the exchange ends; a body that does not
/// fit gets `503` and its connection is closed, and the process's memory stays bounded.
///
/// Shared by the event loops of one configuration generation (as ``WhoamiClient``'s in-flight count is).
final class TokenBodyMemory: Sendable {
    let limit: Int
    private let used = ManagedAtomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// Takes `bytes` if they fit under the limit, and says whether they did.
    func take(_ bytes: Int) -> Bool {
        var current = self.used.load(ordering: .relaxed)
        while true {
            guard current + bytes <= self.limit else { return false }
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
