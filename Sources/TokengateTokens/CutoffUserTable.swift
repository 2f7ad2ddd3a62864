//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics

/// One of the tables of a ``CutoffUserMap``'s base (``CutoffUserBase``): users and their cutoffs in one flat
/// open-addressed hash table (linear probing), built once and then only read.
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
/// `Hasher`, seeded per process: an attacker who picks user ids cannot aim them at one run of slots. The hash's top
/// bits choose the table (``CutoffUserBase/shardBits``); the home slot is the rest of the hash scaled to the capacity
/// (`rest × capacity >> 64`), so any capacity works.
///
/// ### Marks
/// One bit per slot says "a map's overlay may hold a user whose home is this slot". A map sets it before it adds a
/// change to its overlay, and a lookup reads the overlay only when the user's home slot is marked, so the changes
/// since the table was built cost nothing to the users they do not touch (one more load, from a bitmap of a 256th
/// of the slots). Marks are only ever set, never cleared: every map that shares this table sets the marks of its
/// own changes, so a mark is a hint that may be stale (a change undone, a map discarded), never a missing one. They
/// are atomics (relaxed), the one part of a published table that is written: a snapshot published after a mark was
/// set is read after it (the publication orders them), and an older snapshot that sees a newer mark only looks in
/// its own overlay in vain. A rebuilt table starts with none.
final class CutoffUserTable: @unchecked Sendable {
    /// One slot: a key (`nil`: empty) and its cutoffs; 32 bytes.
    @usableFromInline
    struct Slot {
        @usableFromInline var key: CutoffUserKey?
        @usableFromInline var value: UserCutoffs
    }

    /// The table's memory as plain pointers: what a lookup reads (through ``CutoffUserBase/views``), without
    /// touching the table's reference count, which every request thread would otherwise write.
    @usableFromInline
    struct View {
        @usableFromInline let capacity: Int
        @usableFromInline let slots: UnsafeMutablePointer<Slot>
        /// One bit per slot: see "Marks" in the type's overview.
        @usableFromInline let marks: UnsafeMutablePointer<UInt64.AtomicRepresentation>

        /// The home slot of a key whose hash (``CutoffUserTable/hash(_:)``) is `hash`.
        @inline(__always)
        @usableFromInline
        func home(hash: UInt64) -> Int {
            let rest = hash &<< CutoffUserBase.shardBits
            return Int(truncatingIfNeeded: rest.multipliedFullWidth(by: UInt64(self.capacity)).high)
        }

        /// Whether a map's overlay may hold a user whose home slot is `home`. No lock, no allocation.
        @inline(__always)
        @usableFromInline
        func isMarked(_ home: Int) -> Bool {
            let word = UnsafeAtomic<UInt64>(at: self.marks + (home &>> 6)).load(ordering: .relaxed)
            return word & (1 &<< UInt64(home & 63)) != 0
        }

        /// Marks `home` before a map adds the change of a user whose home slot it is to its overlay.
        func mark(_ home: Int) {
            guard !self.isMarked(home) else { return }
            _ = UnsafeAtomic<UInt64>(at: self.marks + (home &>> 6))
                .loadThenBitwiseOr(with: 1 &<< UInt64(home & 63), ordering: .relaxed)
        }

        /// The key's cutoffs, or `nil`, starting at its home slot. No lock, no allocation.
        @inline(__always)
        @usableFromInline
        func find(_ key: CutoffUserKey, home: Int) -> UserCutoffs? {
            var index = home
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
    }

    @usableFromInline let view: View
    var capacity: Int { self.view.capacity }
    var slots: UnsafeMutablePointer<Slot> { self.view.slots }
    /// Occupied slots.
    private(set) var count: Int

    /// An empty table with room for `minimumCount` keys at the maximum load.
    convenience init(minimumCount: Int) {
        self.init(capacity: Self.capacity(for: minimumCount))
    }

    private init(capacity: Int) {
        let slots = UnsafeMutablePointer<Slot>.allocate(capacity: capacity)
        slots.initialize(repeating: Slot(key: nil, value: UserCutoffs()), count: capacity)
        let marks = UnsafeMutablePointer<UInt64.AtomicRepresentation>.allocate(capacity: Self.markWords(capacity))
        marks.initialize(repeating: UInt64.AtomicRepresentation(0), count: Self.markWords(capacity))
        self.view = View(capacity: capacity, slots: slots, marks: marks)
        self.count = 0
    }

    deinit {
        self.view.slots.deinitialize(count: self.view.capacity)
        self.view.slots.deallocate()
        self.view.marks.deinitialize(count: Self.markWords(self.view.capacity))
        self.view.marks.deallocate()
    }

    private static func markWords(_ capacity: Int) -> Int {
        (capacity + 63) / 64
    }

    /// The table every empty map's tables are: no allocation for an empty snapshot.
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

    /// Whether `more` keys fit without taking the table past its maximum load.
    func hasRoom(for more: Int) -> Bool {
        (self.count + more) * 10 <= self.capacity * 7
    }

    /// The key's 64 hash bits (the process-seeded `Hasher`): the top ones choose the table, the rest the home slot.
    @inline(__always)
    @usableFromInline
    static func hash(_ key: CutoffUserKey) -> UInt64 {
        UInt64(UInt(bitPattern: key.hashValue))
    }

    func home(_ key: CutoffUserKey) -> Int {
        self.view.home(hash: Self.hash(key))
    }

    /// The key's cutoffs, or `nil`.
    func find(_ key: CutoffUserKey) -> UserCutoffs? {
        self.view.find(key, home: self.home(key))
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

    /// A row of a batch, with its key's hash (``hash(_:)``), so that a build hashes each row once.
    typealias Row = (key: CutoffUserKey, value: UserCutoffs, hash: UInt64)

    /// Merges a batch of rows into the table in place, the later of each cutoff winning where a key is there already
    /// (``UserCutoffs`` stores "none" as `Int64.min`, so the later of two is their maximum). The caller holds the
    /// only reference and made room for the whole batch.
    ///
    /// The rows are placed in the order of their home slots, not as they came: ten million random writes into
    /// hundreds of megabytes of tables each missed the caches and the TLB (a microsecond apiece on a busy machine),
    /// where a batch swept from the table's start to its end reads memory in one direction.
    func mergeLater(_ batch: [Row]) {
        precondition(batch.count <= 1 << Self.rowBits)
        // Home slot and row in one integer (home above the row's bits): one plain integer sort.
        var order: [UInt64] = []
        order.reserveCapacity(batch.count)
        for row in batch.indices {
            order.append(UInt64(self.view.home(hash: batch[row].hash)) << Self.rowBits | UInt64(row))
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

    /// A copy with room for at least `minimumCount` keys, without marks, every entry rehashed into it in batches
    /// placed by slot (``mergeLater(_:)``; a table holds no key twice, so nothing is merged).
    func resized(minimumCount: Int) -> CutoffUserTable {
        let table = CutoffUserTable(minimumCount: Swift.max(minimumCount, self.count))
        var batch: [Row] = []
        batch.reserveCapacity(Swift.min(self.count, 65_536))
        for index in 0..<self.capacity {
            if let key = self.slots[index].key {
                batch.append((key, self.slots[index].value, Self.hash(key)))
                if batch.count == 65_536 {
                    table.mergeLater(batch)
                    batch.removeAll(keepingCapacity: true)
                }
            }
        }
        table.mergeLater(batch)
        return table
    }

    /// A copy of the same capacity, slot for slot, without marks: one sequential pass, where rehashing visits the
    /// new table at random. What folding changes into the table starts from while it has room.
    func copy() -> CutoffUserTable {
        let table = CutoffUserTable(capacity: self.capacity)
        table.slots.update(from: self.slots, count: self.capacity)
        table.count = self.count
        return table
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
