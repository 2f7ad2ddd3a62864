//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Whose bucket a request takes from: a client address, a verified user, or the whole route.
///
/// Fixed-size, so a per-request key needs no allocation and hashes as three words rather than byte by byte:
/// an address is its 4 or 16 bytes in two words; a user is the subject's hash (computed once, with the
/// process's seeded ``Hasher``) with the subject kept beside it. Equality always compares the whole key — the
/// subject itself, not only its hash — so two users whose subjects collide keep separate buckets, and no
/// client can spend another's.
struct BucketKey: Hashable, Sendable {
    private enum Kind: UInt8 {
        case address
        case user
        case route
        /// A request without a client address (no peer): all such share one bucket, so they are limited
        /// rather than let through.
        case noAddress
    }

    private let high: UInt64
    private let low: UInt64
    /// The kind in the low byte, the address's length (4 or 16) or the subject's in the rest.
    private let tag: UInt64
    /// The user's subject; `nil` for every other kind.
    private let subject: String?

    private init(kind: Kind, high: UInt64, low: UInt64, length: Int, subject: String? = nil) {
        self.high = high
        self.low = low
        self.tag = UInt64(kind.rawValue) | UInt64(truncatingIfNeeded: length) << 8
        self.subject = subject
    }

    /// A client address's bytes (4 for IPv4, 16 for IPv6; at most 16). An IPv4 address and the IPv6 address
    /// that maps it are different keys, as they were different texts.
    init(address bytes: some Collection<UInt8>) {
        precondition(bytes.count <= 16, "an address is at most 16 bytes")
        var high: UInt64 = 0
        var low: UInt64 = 0
        for (index, byte) in bytes.enumerated() {
            if index < 8 {
                high |= UInt64(byte) << UInt64(56 - 8 * index)
            } else {
                low |= UInt64(byte) << UInt64(56 - 8 * (index - 8))
            }
        }
        self.init(kind: .address, high: high, low: low, length: bytes.count)
    }

    /// The client's key: its address, or the one shared key of requests without one.
    init(client bytes: [UInt8]?) {
        if let bytes {
            self.init(address: bytes)
        } else {
            self.init(kind: .noAddress, high: 0, low: 0, length: 0)
        }
    }

    /// A verified user's key, by the token's subject.
    init(user subject: String) {
        self.init(user: subject, digest: UInt64(UInt(bitPattern: subject.hashValue)))
    }

    /// A user's key with a given `digest` of its subject: lets a test make two subjects collide.
    init(user subject: String, digest: UInt64) {
        self.init(kind: .user, high: digest, low: 0, length: subject.utf8.count, subject: subject)
    }

    /// A client address's key (not the shared one of requests without an address).
    var isAddress: Bool { self.tag & 0xFF == UInt64(Kind.address.rawValue) }

    /// The one key of a route-wide limit.
    static let route = BucketKey(kind: .route, high: 0, low: 0, length: 0)

    static func == (lhs: BucketKey, rhs: BucketKey) -> Bool {
        lhs.high == rhs.high && lhs.low == rhs.low && lhs.tag == rhs.tag && lhs.subject == rhs.subject
    }

    /// The three words only: a user's subject is already in `high` (its digest), and equality settles the rest.
    func hash(into hasher: inout Hasher) {
        hasher.combine(self.high)
        hasher.combine(self.low)
        hasher.combine(self.tag)
    }

    /// Which of `count` shards (a power of two) the key lives in, mixed with the limiter's random `seed` so a
    /// sender cannot choose addresses that crowd one shard. One multiply-and-shift: the dictionary's own hash
    /// comes after.
    func shard(seed: UInt64, count: Int) -> Int {
        var mixed = (self.high ^ seed) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= self.low &+ self.tag &+ (mixed >> 29)
        mixed &*= 0xBF58_476D_1CE4_E5B9
        mixed ^= mixed >> 31
        return Int(truncatingIfNeeded: mixed & UInt64(count - 1))
    }
}
