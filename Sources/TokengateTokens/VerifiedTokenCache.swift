//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// A bounded memory of the tokens one event loop has already verified, so that a client that sends the same
/// public-key-signed token again skips the base64url decoding, the JSON parsing and, above all, the signature
/// check (60–100 µs for EdDSA or ES256).
///
/// ### What it holds, and what it does not skip
/// An entry is what a token's payload says once its signature was good (``TokenVerifier/SignedClaims``): the
/// user, `iat`, the api-only flag, `exp`, `nbf`, whether `iss` and `aud` matched, the key and the algorithm. On a
/// hit the verifier still runs every check that depends on the route, the moment or the cutoffs, with the same
/// code as for a fresh token: the route's algorithms, its required claims, `iat`/`nbf`/`exp` against the
/// current time, the global and per-user cutoffs, the accepted kinds. A revocation therefore refuses a cached
/// token on its very next request, and an expired one is refused although it is cached.
///
/// ### Keys, bounds and eviction
/// - **Key:** HMAC-SHA-256 of the whole token under a random key drawn when the cache is made: a 256-bit
///   digest compared in full and without early exit (``Digest/matches(_:)``). The random key means nobody
///   outside the process can predict which set a token lands in.
/// - **Memory:** at most ``capacity`` entries of fixed size (a digest and the claims, whose user id is at most
///   256 bytes by ``UserIDRules``), whatever the tokens' length; the table is allocated on the first insert.
/// - **Eviction:** 4-way set-associative with a second-chance (CLOCK) hand per set: a lookup and an insert each
///   touch one set of four slots, so both are O(1) whatever arrives. An entry starts unreferenced and a hit
///   marks it, so a stream of tokens seen once evicts its own kind before any token in use.
/// - **Admission:** only tokens that verified (``TokenVerifier/verify(_:accept:cutoffs:now:cache:)`` inserts
///   after a `.valid` result): garbage, a bad signature or an expired token never displaces anything.
/// - **Scope:** the cache holds entries of one verifier scope at a time (one key set read with one set of claim
///   names, issuer and audiences; ``admit(scope:)``). A newer scope (a reload, a changed key set) empties it; an
///   older one bypasses it.
///
/// Not `Sendable` and without a lock: each event loop has its own (`VerifiedTokenCacheDirectory` in the
/// gateway), and only that loop's thread touches it.
public final class VerifiedTokenCache {
    /// Slots per set.
    public static let ways = 4

    /// A 256-bit digest of a token, as four words.
    struct Digest {
        var w0: UInt64
        var w1: UInt64
        var w2: UInt64
        var w3: UInt64

        static let zero = Digest(w0: 0, w1: 0, w2: 0, w3: 0)

        /// All 256 bits, with no early exit, so the time taken says nothing about how much of it matched.
        @inline(__always)
        func matches(_ other: Digest) -> Bool {
            ((self.w0 ^ other.w0) | (self.w1 ^ other.w1) | (self.w2 ^ other.w2) | (self.w3 ^ other.w3)) == 0
        }
    }

    private struct Slot {
        var digest: Digest
        /// Set by a hit, cleared as the set's hand passes: the second chance.
        var referenced: Bool
        /// Nil for an empty slot.
        var claims: TokenVerifier.SignedClaims?

        static let empty = Slot(digest: .zero, referenced: false, claims: nil)
    }

    /// The most entries the cache holds: the configured size rounded down to a multiple of ``ways`` (sizes
    /// below it make one set of that many slots). 0 disables the cache.
    public let capacity: Int
    private let sets: Int
    private let setWays: Int
    /// `sets * setWays` slots once the first token is inserted; empty until then.
    private var slots: [Slot] = []
    /// One CLOCK hand per set.
    private var hands: [UInt8] = []
    /// The verifier scope the entries belong to (``TokenVerifier/Prepared/cacheScope``); 0 before any.
    private var scope: UInt64 = 0
    /// How many slots hold an entry.
    public private(set) var count = 0
    /// Lookups that found their token, and lookups that did not (plain counters: one thread touches them).
    public private(set) var hits = 0
    public private(set) var misses = 0
    /// The HMAC key with its pads precomputed (``SignatureCheck``'s C object), owned and freed here.
    private let digestKey: OpaquePointer

    /// - Parameter entries: the most tokens to remember; 0 disables the cache (every token is verified).
    public init(entries: Int) {
        let entries = max(0, entries)
        self.setWays = min(entries, Self.ways)
        self.sets = self.setWays == 0 ? 0 : entries / self.setWays
        self.capacity = self.sets * self.setWays
        var generator = SystemRandomNumberGenerator()
        var secret = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        guard let key = secret.withUnsafeBytes({ CTokengateShims_hmac_key_new(256, $0.baseAddress, $0.count) }) else {
            preconditionFailure("libcrypto could not prepare an HMAC-SHA-256 key")
        }
        for index in secret.indices { secret[index] = 0 }
        self.digestKey = key
    }

    deinit {
        CTokengateShims_hmac_key_free(self.digestKey)
    }

    /// Whether a verifier of `scope` may use the cache now. A newer scope than the entries' empties the cache
    /// and takes it over; an older one (a request still finishing under the configuration a reload replaced)
    /// is turned away, so it neither reads nor evicts the current entries.
    @inline(__always)
    func admit(scope: UInt64) -> Bool {
        if scope == self.scope { return true }
        if scope < self.scope { return false }
        self.removeAll()
        self.scope = scope
        return true
    }

    /// Empties the cache, keeping its table.
    public func removeAll() {
        guard self.count > 0 else { return }
        for index in self.slots.indices { self.slots[index] = .empty }
        for index in self.hands.indices { self.hands[index] = 0 }
        self.count = 0
    }

    /// The token's keyed digest; allocation-free.
    @inline(__always)
    func digest(_ token: UnsafeRawBufferPointer) -> Digest {
        var digest = Digest.zero
        withUnsafeMutableBytes(of: &digest) { out in
            CTokengateShims_hmac_compute(self.digestKey, token.baseAddress, token.count, out.baseAddress)
        }
        return digest
    }

    /// The set a digest lands in: the top 32 bits of its first word scaled to `sets` (no division).
    @inline(__always)
    private func firstSlot(_ digest: Digest) -> Int {
        Int(((digest.w0 >> 32) &* UInt64(self.sets)) >> 32) &* self.setWays
    }

    /// The claims stored under `digest`, marking the entry as used; nil when absent.
    func lookup(_ digest: Digest) -> TokenVerifier.SignedClaims? {
        if self.count > 0 {
            let first = self.firstSlot(digest)
            for index in first..<(first + self.setWays) {
                guard self.slots[index].claims != nil, self.slots[index].digest.matches(digest) else { continue }
                self.slots[index].referenced = true
                self.hits &+= 1
                return self.slots[index].claims
            }
        }
        self.misses &+= 1
        return nil
    }

    /// Remembers a verified token: an empty slot of its set if there is one, else the first unreferenced slot
    /// the set's hand reaches (clearing the marks it passes). At most `2 × ways` steps.
    func insert(_ digest: Digest, _ claims: TokenVerifier.SignedClaims) {
        guard self.capacity > 0 else { return }
        if self.slots.isEmpty {
            self.slots = Array(repeating: .empty, count: self.capacity)
            self.hands = Array(repeating: 0, count: self.sets)
        }
        let first = self.firstSlot(digest)
        for index in first..<(first + self.setWays) where self.slots[index].claims == nil {
            self.slots[index] = Slot(digest: digest, referenced: false, claims: claims)
            self.count += 1
            return
        }
        let set = first / self.setWays
        var hand = Int(self.hands[set])
        while self.slots[first + hand].referenced {
            self.slots[first + hand].referenced = false
            hand = (hand + 1) % self.setWays
        }
        self.slots[first + hand] = Slot(digest: digest, referenced: false, claims: claims)
        self.hands[set] = UInt8((hand + 1) % self.setWays)
    }
}

@available(*, unavailable)
extension VerifiedTokenCache: Sendable {}
