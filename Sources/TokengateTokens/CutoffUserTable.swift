//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The base of a ``CutoffUserMap``: users and their cutoffs in one flat open-addressed hash table (linear probing),
/// built once and then only read.
///
/// ### Why a flat table
/// A lookup hashes the key once, goes to one slot and compares keys in the slots that follow it until it finds the
/// key or an empty slot: one or two cache lines, where a hash tree walks one node per level (five at 10 million
/// users, each a likely cache miss). Building it is one allocation and one probe per row, which is what a gateway's
/// start does ten million times.
///
/// ### Sharing
/// The table is mutated in place only while one value holds it (``CutoffUserMap`` checks
/// `isKnownUniquelyReferenced` first): while it is built, before any snapshot publishes it. Once a snapshot holds it,
/// it is immutable, and requests on any thread read it without locks; changes then go to the map's overlay.
///
/// ### Hashing
/// `Hasher`, seeded per process: an attacker who picks user ids cannot aim them at one run of slots. The home slot
/// is the hash scaled to the capacity (`hash × capacity >> 64`), so any capacity works.
final class CutoffUserTable: @unchecked Sendable {
    /// One slot: a key (`nil`: empty) and its cutoffs; 32 bytes.
    @usableFromInline
    struct Slot {
        @usableFromInline var key: CutoffUserKey?
        @usableFromInline var value: UserCutoffs
    }

    @usableFromInline let capacity: Int
    @usableFromInline let slots: UnsafeMutablePointer<Slot>
    /// Occupied slots.
    private(set) var count: Int

    /// An empty table with room for `minimumCount` keys at the maximum load.
    init(minimumCount: Int) {
        self.capacity = Self.capacity(for: minimumCount)
        self.slots = .allocate(capacity: self.capacity)
        self.slots.initialize(repeating: Slot(key: nil, value: UserCutoffs()), count: self.capacity)
        self.count = 0
    }

    deinit {
        self.slots.deinitialize(count: self.capacity)
        self.slots.deallocate()
    }

    /// The table every empty map starts with: no allocation for an empty snapshot.
    static let empty = CutoffUserTable(minimumCount: 0)

    /// Slots for `count` keys: at most 2/3 full once built (a lookup of an absent user then reads about 5 slots,
    /// of a present one 2), and the table grows before it is 7/10 full.
    static func capacity(for count: Int) -> Int {
        max(8, count + count / 2 + 1)
    }

    /// Whether one more key would take the table past its maximum load (7/10).
    var isFull: Bool {
        (self.count + 1) * 10 > self.capacity * 7
    }

    @inline(__always)
    @usableFromInline
    func home(_ key: CutoffUserKey) -> Int {
        let hash = UInt64(UInt(bitPattern: key.hashValue))
        return Int(truncatingIfNeeded: hash.multipliedFullWidth(by: UInt64(self.capacity)).high)
    }

    /// The key's cutoffs, or `nil`. No lock, no allocation.
    @inline(__always)
    @usableFromInline
    func find(_ key: CutoffUserKey) -> UserCutoffs? {
        var index = self.home(key)
        while true {
            let slot = self.slots + index
            guard let stored = slot.pointee.key else {
                return nil
            }
            if stored == key {
                return slot.pointee.value
            }
            index += 1
            if index == self.capacity {
                index = 0
            }
        }
    }

    /// Sets the key's cutoffs in place. The caller holds the only reference and made room (``isFull``).
    /// - Returns: whether the key was new.
    @discardableResult
    func insert(_ key: CutoffUserKey, _ value: UserCutoffs) -> Bool {
        var index = self.home(key)
        while true {
            let slot = self.slots + index
            guard let stored = slot.pointee.key else {
                slot.pointee = Slot(key: key, value: value)
                self.count += 1
                return true
            }
            if stored == key {
                slot.pointee.value = value
                return false
            }
            index += 1
            if index == self.capacity {
                index = 0
            }
        }
    }

    /// Merges a batch of rows into the table in place, the later of each cutoff winning where a key is there already
    /// (``UserCutoffs`` stores "none" as `Int64.min`, so the later of two is their maximum). The caller holds the
    /// only reference and made room for the whole batch.
    ///
    /// The rows are placed in the order of their home slots, not as they came: ten million random writes into a
    /// table of hundreds of megabytes each missed the caches and the TLB (a microsecond apiece on a busy machine),
    /// where a batch swept from the table's start to its end reads memory in one direction.
    func mergeLater(_ batch: [(key: CutoffUserKey, value: UserCutoffs)]) {
        precondition(batch.count <= 1 << Self.rowBits)
        // Home slot and row in one integer (home above the row's bits): one plain integer sort.
        var order: [UInt64] = []
        order.reserveCapacity(batch.count)
        for row in batch.indices {
            order.append(UInt64(self.home(batch[row].key)) << Self.rowBits | UInt64(row))
        }
        order.sort()
        for packed in order {
            let home = Int(packed >> Self.rowBits)
            let row = Int(packed & (1 << Self.rowBits - 1))
            let key = batch[row].key
            let value = batch[row].value
            var index = home
            while true {
                let slot = self.slots + index
                guard let stored = slot.pointee.key else {
                    slot.pointee = Slot(key: key, value: value)
                    self.count += 1
                    break
                }
                if stored == key {
                    slot.pointee.value.storedRevokedBefore = Swift.max(
                        slot.pointee.value.storedRevokedBefore, value.storedRevokedBefore)
                    slot.pointee.value.storedAPIRevokedBefore = Swift.max(
                        slot.pointee.value.storedAPIRevokedBefore, value.storedAPIRevokedBefore)
                    break
                }
                index += 1
                if index == self.capacity {
                    index = 0
                }
            }
        }
    }

    /// Bits of a row's index in ``mergeLater(_:)``'s sort keys: batches of up to 131,072 rows.
    static let rowBits: UInt64 = 17

    /// A copy with room for at least `minimumCount` keys, every entry rehashed into it in batches placed by slot
    /// (``mergeLater(_:)``; a table holds no key twice, so nothing is merged).
    func resized(minimumCount: Int) -> CutoffUserTable {
        let table = CutoffUserTable(minimumCount: Swift.max(minimumCount, self.count))
        var batch: [(key: CutoffUserKey, value: UserCutoffs)] = []
        batch.reserveCapacity(Swift.min(self.count, 65_536))
        for index in 0..<self.capacity {
            if let key = self.slots[index].key {
                batch.append((key, self.slots[index].value))
                if batch.count == 65_536 {
                    table.mergeLater(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        table.mergeLater(batch)
        return table
    }

    /// A copy of the same capacity, slot for slot: one sequential pass, where rehashing visits the new table at
    /// random. What a rebuild of the base starts from while the table has room.
    func copy() -> CutoffUserTable {
        let table = CutoffUserTable(capacity: self.capacity)
        table.slots.update(from: self.slots, count: self.capacity)
        table.count = self.count
        return table
    }

    private init(capacity: Int) {
        self.capacity = capacity
        self.slots = .allocate(capacity: capacity)
        self.slots.initialize(repeating: Slot(key: nil, value: UserCutoffs()), count: capacity)
        self.count = 0
    }

    /// Removes the key in place (the caller holds the only reference), shifting the slots after it back so that no
    /// probe stops early at the hole.
    /// - Returns: whether the key was there.
    @discardableResult
    func remove(_ key: CutoffUserKey) -> Bool {
        var hole = self.home(key)
        while true {
            guard let stored = self.slots[hole].key else {
                return false
            }
            if stored == key {
                break
            }
            hole = hole + 1 == self.capacity ? 0 : hole + 1
        }
        var next = hole
        while true {
            next = next + 1 == self.capacity ? 0 : next + 1
            guard let stored = self.slots[next].key else {
                break
            }
            // The key at `next` may stay if its home lies cyclically in (hole, next]; else it moves into the hole.
            let home = self.home(stored)
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                self.slots[hole] = self.slots[next]
                hole = next
            }
        }
        self.slots[hole] = Slot(key: nil, value: UserCutoffs())
        self.count -= 1
        return true
    }
}
