//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens
import TokengateHTTP

/// The PKCE codes redeemed in the last minutes, by nonce (``TokenPageCodeNonce``), each until it expires and
/// then for the clock skew: so that a code is redeemed once (RFC 6749 §4.1.2: a code used twice must be refused).
/// A plain value; the gateway keeps one for the whole process under a lock (``RedeemedCodeMemory``).
///
/// ### Bounded
/// At most ``capacity`` codes are remembered. A code is remembered until its `keepUntil`: the redemption passes
/// the code's `exp` plus `tokens.clock_skew` (at most 60 seconds plus twice the skew after its redemption), so
/// that a wall clock stepped back by up to the skew after a sweep does not reopen a code (its `now < exp` would
/// pass again); past that it is refused as expired anyway. When the memory is full of codes still kept, a new
/// redemption is refused (``Admission/full``), never let through unremembered: fail closed. 100,000 codes in two
/// minutes (the default skew of 60 s) is some 800 app logins a second on one instance, far beyond a real
/// deployment's. A full memory takes about 6 MB (2¹⁸ slots of 24 bytes: a 16-byte nonce, an
/// 8-byte expiry), twice that for a moment while a sweep builds the survivors' copy.
///
/// ### Why expired entries are dropped in sweeps
/// Codes do not arrive in the order they expire (another instance's clock, a slow app), so there is no cheap
/// oldest-first queue. Instead a whole sweep drops every expired entry, but only when the count has doubled
/// since the last sweep (so each sweep's cost is paid by as many insertions: constant per redemption) or the
/// memory is full, and never before the earliest expiry (when nothing can have expired).
struct RedeemedCodes: Sendable {
    /// The capacity the gateway uses.
    static let defaultCapacity = 100_000
    /// Below this many entries no sweep is started by the count alone (a sweep of a few entries saves nothing).
    static let minimumSweepCount = 1024

    /// What ``admit(_:expiresAt:now:)`` decided.
    enum Admission: Equatable, Sendable {
        /// Not seen before: now remembered until it expires; the redemption may go on.
        case first
        /// Redeemed before (and not yet expired): refuse it.
        case reused
        /// Not seen before, but the memory is full of codes that have not expired: refuse it (fail closed).
        case full
    }

    let capacity: Int
    /// Until when each remembered code is kept (its `exp` plus the clock skew, UNIX seconds).
    private var expiries: [TokenPageCodeNonce: Int64] = [:]
    /// No entry expires before this (`Int64.max` when empty): a sweep before it would find nothing to drop.
    private var earliestExpiry = Int64.max
    /// A sweep is started when the count reaches this (or ``capacity``).
    private var sweepCount: Int

    init(capacity: Int = Self.defaultCapacity) {
        precondition(capacity > 0, "a memory of redeemed codes must hold at least one")
        self.capacity = capacity
        self.sweepCount = min(capacity, Self.minimumSweepCount)
    }

    /// How many codes are remembered now (expired ones not yet swept included).
    var count: Int { self.expiries.count }

    /// Remembers the code named `nonce` until `keepUntil`, if it is new and there is room.
    ///
    /// A code found in the memory is `reused` whatever the time: it cannot have been dropped there before it
    /// expires as a code, even for a clock stepped back by the skew (`keepUntil` is its `exp` plus the skew), and
    /// the redemption checks expiry first.
    mutating func admit(_ nonce: TokenPageCodeNonce, keepUntil expiresAt: Int64, now: Int64) -> Admission {
        if self.expiries[nonce] != nil {
            return .reused
        }
        if self.expiries.count >= self.sweepCount {
            self.dropExpired(now: now)
        }
        guard self.expiries.count < self.capacity else { return .full }
        self.expiries[nonce] = expiresAt
        self.earliestExpiry = min(self.earliestExpiry, expiresAt)
        return .first
    }

    /// Drops every entry whose code has expired at `now`, when one may have.
    private mutating func dropExpired(now: Int64) {
        guard now >= self.earliestExpiry else { return }
        // `filter` builds a new dictionary of the survivors' size, so the memory of the dropped ones is freed too.
        self.expiries = self.expiries.filter { now < $0.value }
        self.earliestExpiry = self.expiries.values.min() ?? .max
        self.sweepCount = min(self.capacity, max(Self.minimumSweepCount, 2 * self.expiries.count))
    }
}
