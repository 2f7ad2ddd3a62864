//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateTokens

/// Every event loop's ``VerifiedTokenCache``, one per loop and per generation: built with the generation (so a
/// reload starts every loop with an empty cache) and immutable after that, so any thread may look up its loop's
/// entry; a cache itself is only touched on its own loop, so the request path takes no lock and no atomic.
final class VerifiedTokenCacheDirectory: Sendable {
    /// Holds one loop's cache so the directory can be shared across threads.
    ///
    /// `@unchecked Sendable` for the reason ``UpstreamPoolDirectory``'s entry is: the cache is created before any
    /// loop runs an exchange and afterwards only used on `eventLoop` (``cache(for:)`` checks it).
    private final class Entry: @unchecked Sendable {
        let eventLoop: any EventLoop
        let cache: VerifiedTokenCache

        init(eventLoop: any EventLoop, cache: VerifiedTokenCache) {
            self.eventLoop = eventLoop
            self.cache = cache
        }
    }

    private let byLoop: [ObjectIdentifier: Entry]

    /// - Parameter entries: `tokens.verified_cache.entries`, per loop. No caches at all when it is 0 or when no
    ///   route's verifier would use one (an HMAC key set), so such a gateway pays no lookup per request.
    init(entries: Int, runtime: GatewayRuntime, group: any EventLoopGroup) {
        var byLoop: [ObjectIdentifier: Entry] = [:]
        let used = runtime.routes.contains { route in
            route.tokens?.verifier?.usesVerifiedTokenCache == true
                || route.tokens?.issuers?.entries.contains { $0?.verifier?.usesVerifiedTokenCache == true } == true
        }
        if entries > 0 && used {
            for loop in group.makeIterator() {
                byLoop[ObjectIdentifier(loop)] = Entry(eventLoop: loop, cache: VerifiedTokenCache(entries: entries))
            }
        }
        self.byLoop = byLoop
    }

    /// The cache of `eventLoop`, or nil when caching is off; call on that loop.
    func cache(for eventLoop: any EventLoop) -> VerifiedTokenCache? {
        guard !self.byLoop.isEmpty, let entry = self.byLoop[ObjectIdentifier(eventLoop)] else { return nil }
        eventLoop.preconditionInEventLoop()
        return entry.cache
    }

    /// How many tokens each loop's cache holds, read on each loop (tests and diagnostics, never per request).
    func counts() async throws -> [Int] {
        var counts: [Int] = []
        for entry in self.byLoop.values {
            counts.append(try await entry.eventLoop.submit { entry.cache.count }.get())
        }
        return counts
    }
}
