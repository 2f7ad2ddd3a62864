//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig

/// When a fetched key set is fetched again, and when its last good copy stops counting: a value-type state
/// machine, fed the fetches' outcomes and the clock (milliseconds), answering with what to do next. No I/O, no
/// timers: ``RemoteKeySource`` runs it and is tested through it.
///
/// - A success keeps the set for its lifetime (`max-age` inside `cache_min`…`cache_max`; `cache_min` without a
///   `max-age`) and schedules the refresh at four fifths of it, so that the next set is in before this one
///   expires.
/// - A failure retries after `refetch_interval`, doubling with each failure in a row up to five minutes (a
///   provider that is down is not asked every second by every gateway), and never later than the moment the
///   last good set runs out.
/// - The last good set counts until its lifetime plus `max_stale` have passed; then ``Step/dropKeys`` says the
///   issuer has no usable keys.
struct RemoteKeySetSchedule: Sendable, Equatable {
    let cacheMinimum: Int64
    let cacheMaximum: Int64
    let refetchInterval: Int64
    let maxStale: Int64

    /// When the last good set was fetched; `nil` before the first success, and after the set was dropped.
    private(set) var fetchedAt: Int64?
    /// When the last good set's lifetime ends.
    private(set) var expiresAt: Int64?
    /// Failures since the last success.
    private(set) var failures = 0

    /// What to do after an event: fetch again at `nextFetch`; `dropKeys` when the last good set ran out.
    struct Step: Equatable {
        var nextFetch: Int64
        var dropKeys: Bool
    }

    init(_ configuration: RemoteKeySetConfiguration) {
        func milliseconds(_ duration: Duration) -> Int64 {
            let (seconds, attoseconds) = duration.components
            return seconds * 1000 + attoseconds / 1_000_000_000_000_000
        }
        self.cacheMinimum = milliseconds(configuration.cacheMinimum)
        self.cacheMaximum = milliseconds(configuration.cacheMaximum)
        self.refetchInterval = milliseconds(configuration.refetchInterval)
        self.maxStale = milliseconds(configuration.maxStale)
    }

    /// The lifetime a fetched set gets, in milliseconds.
    func lifetime(maxAgeSeconds: Int64?) -> Int64 {
        guard let maxAgeSeconds else { return self.cacheMinimum }
        let asked = maxAgeSeconds > Int64.max / 1000 ? Int64.max : maxAgeSeconds * 1000
        return min(max(asked, self.cacheMinimum), self.cacheMaximum)
    }

    mutating func succeeded(now: Int64, maxAgeSeconds: Int64?) -> Step {
        let lifetime = self.lifetime(maxAgeSeconds: maxAgeSeconds)
        self.fetchedAt = now
        self.expiresAt = now + lifetime
        self.failures = 0
        return Step(nextFetch: now + max(lifetime * 4 / 5, 1000), dropKeys: false)
    }

    mutating func failed(now: Int64) -> Step {
        self.failures += 1
        let backoff = min(self.refetchInterval << Int64(min(self.failures - 1, 16)), max(self.refetchInterval, 300_000))
        var next = now + max(backoff, 1000)
        var drop = false
        if let runsOut = self.runsOut {
            if now >= runsOut {
                drop = true
                self.fetchedAt = nil
                self.expiresAt = nil
            } else {
                next = min(next, runsOut)
            }
        }
        return Step(nextFetch: next, dropKeys: drop)
    }

    /// When the last good set stops counting: its lifetime plus `max_stale`.
    var runsOut: Int64? {
        self.expiresAt.map { $0 + self.maxStale }
    }
}
