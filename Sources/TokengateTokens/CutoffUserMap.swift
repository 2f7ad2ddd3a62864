//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import HashTreeCollections

/// Every user's cutoffs: a flat hash table built once (``CutoffUserTable``, the base) and the changes since, in a
/// small persistent map (swift-collections' `TreeDictionary`, the overlay).
///
/// ### Why two levels
/// The sync service keeps the enforced table next to the snapshot it published, and requests may still hold older
/// snapshots, so a change must not copy the table: with a `Dictionary` the first write after a publish copied all of
/// it (0.34 s and twice the memory at 10 million users). A persistent map alone makes a change cheap but every lookup
/// walks one node per level, five at 10 million users, and building it node by node was most of a gateway's start.
/// Here a change copies the O(log k) overlay nodes on the way to the user (k: changes since the base was built) and
/// shares the base and the rest of the overlay with the published snapshot, and a lookup reads the overlay (nothing
/// at all while it is empty) and then one run of slots in the base.
///
/// ### Building and compacting
/// While one value holds the base (a store's first load, a file being read, before anything publishes it) and the
/// overlay is empty, writes go into the base in place, which grows by doubling: one probe per row. Once the overlay
/// holds more than ``compactionThreshold`` changes, the next change builds a new base from both (O(n); at 10 million
/// users well under a second, and the old base lives on until the snapshots that hold it are released: the one time
/// two bases exist). A full reload merges the store's rows into the map, so only the rows that differ join the
/// overlay and a resync that finds what is enforced allocates nothing.
///
/// ### Lookups
/// `subscript(_:)` hashes the key with the process-seeded `Hasher` (an attacker who picks user ids cannot aim them
/// at one run of slots), once for the base and, when the overlay holds changes, once for it. No lock, no
/// allocation.
///
/// ### Memory
/// A base slot is the key (16 bytes: a `String`, whose bytes are inline up to 15 UTF-8 bytes and otherwise in one
/// heap buffer) and the cutoffs (16 bytes, ``UserCutoffs``); the base is at most 7/10 and, as built, about 2/3 full.
/// See `docs/operations.md`, "Sizing the cutoff snapshot", for figures.
public struct CutoffUserMap: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: CutoffUserKey, value: UserCutoffs)

    private var base: CutoffUserTable
    /// The changes since the base was built: a user's cutoffs, or `nil` for a user of the base that was removed.
    /// Holds a user only where the map differs from the base.
    private var overlay: TreeDictionary<CutoffUserKey, UserCutoffs?>
    public private(set) var count: Int

    public init() {
        self.base = .empty
        self.overlay = [:]
        self.count = 0
    }

    public init(dictionaryLiteral elements: (CutoffUserKey, UserCutoffs)...) {
        self.init(minimumCapacity: elements.count)
        for (key, value) in elements {
            self[key] = value
        }
    }

    /// A map of `dictionary`'s entries (for tests, files and benchmarks).
    public init(_ dictionary: [CutoffUserKey: UserCutoffs]) {
        self.init(minimumCapacity: dictionary.count)
        for (key, value) in dictionary {
            self[key] = value
        }
    }

    /// An empty map whose base has room for `minimumCapacity` users before it grows.
    public init(minimumCapacity: Int) {
        self.base = minimumCapacity > 0 ? CutoffUserTable(minimumCount: minimumCapacity) : .empty
        self.overlay = [:]
        self.count = 0
    }

    /// The most users a size hint (``init(minimumCapacity:)`` from a store's count or estimate) reserves room for:
    /// 64 million (3 GiB of slots). A larger table grows as its rows arrive, so a wrong estimate cannot allocate
    /// more than that up front.
    public static let largestSizeHint: Int64 = 64_000_000

    /// How many changes the overlay holds before the next one rebuilds the base: a 32nd of the base (at least 4,096),
    /// so rebuilding costs a few percent of a change on average, and the overlay a lookup reads stays small.
    var compactionThreshold: Int {
        Swift.max(4_096, self.base.count / 32)
    }

    /// The number of changes in the overlay (for tests and measurements).
    public var overlayCount: Int { self.overlay.count }

    /// The user's cutoffs, or `nil`; setting `nil` removes the user. See the type's overview for the costs.
    public subscript(user: CutoffUserKey) -> UserCutoffs? {
        @inline(__always) get {
            if !self.overlay.isEmpty, let changed = self.overlay[user] {
                return changed
            }
            return self.base.find(user)
        }
        set {
            if self.overlay.isEmpty, let newValue, self.baseIsWritable() {
                if self.base.isFull {
                    self.base = self.base.resized(minimumCount: self.base.count * 2)
                }
                if self.base.insert(user, newValue) {
                    self.count += 1
                }
                return
            }
            let inBase = self.base.find(user)
            let old = self.overlay.isEmpty ? inBase : (self.overlay[user] ?? inBase)
            if newValue == inBase {
                self.overlay.removeValue(forKey: user)
            } else {
                self.overlay[user] = .some(newValue)
            }
            self.count += (newValue == nil ? 0 : 1) - (old == nil ? 0 : 1)
            if self.overlay.count > self.compactionThreshold {
                self.compact()
            }
        }
    }

    /// Whether the base may be written in place: this value holds the only reference (nothing published it), or it
    /// is the shared empty table, which is then replaced by a table of this value's own.
    private mutating func baseIsWritable() -> Bool {
        if self.base === CutoffUserTable.empty {
            self.base = CutoffUserTable(minimumCount: 64)
            return true
        }
        return isKnownUniquelyReferenced(&self.base)
    }

    /// A new base of every entry, and an empty overlay: the base copied slot for slot (or rehashed into a larger
    /// table when the users outgrew it), then the overlay's changes written into the copy.
    private mutating func compact() {
        let table =
            (self.count + 1) * 10 > self.base.capacity * 7
            ? self.base.resized(minimumCount: self.count) : self.base.copy()
        // Removals first, so the copy never holds more than the map's users (at most 7/10 of its slots).
        for (key, value) in self.overlay where value == nil {
            table.remove(key)
        }
        for (key, value) in self.overlay {
            if let value {
                table.insert(key, value)
            }
        }
        self.base = table
        self.overlay = [:]
    }

    /// Merges `batch` into this map, the later of each cutoff winning for a user already there: what a store's
    /// first load does with every row (``CutoffUserMapBuilder``). In place while nothing else holds the base.
    mutating func mergeLater(_ batch: [(key: CutoffUserKey, value: UserCutoffs)]) {
        guard self.overlay.isEmpty, self.baseIsWritable() else {
            for (key, value) in batch {
                let current = self[key] ?? UserCutoffs()
                var merged = value
                merged.storedRevokedBefore = Swift.max(current.storedRevokedBefore, value.storedRevokedBefore)
                merged.storedAPIRevokedBefore = Swift.max(current.storedAPIRevokedBefore, value.storedAPIRevokedBefore)
                self[key] = merged
            }
            return
        }
        if (self.base.count + batch.count) * 10 > self.base.capacity * 7 {
            self.base = self.base.resized(minimumCount: Swift.max(self.base.count * 2, self.base.count + batch.count))
        }
        self.base.mergeLater(batch)
        self.count = self.base.count
    }

    public var isEmpty: Bool { self.count == 0 }

    public func makeIterator() -> Iterator {
        Iterator(map: self)
    }

    /// Visits the entries in an unspecified order: the base's (skipping users the overlay changed), then the
    /// overlay's.
    public struct Iterator: IteratorProtocol {
        private let base: CutoffUserTable
        private let overlay: TreeDictionary<CutoffUserKey, UserCutoffs?>
        private var index = 0
        private var changes: TreeDictionary<CutoffUserKey, UserCutoffs?>.Iterator

        fileprivate init(map: CutoffUserMap) {
            self.base = map.base
            self.overlay = map.overlay
            self.changes = map.overlay.makeIterator()
        }

        public mutating func next() -> Element? {
            while self.index < self.base.capacity {
                let slot = self.base.slots[self.index]
                self.index += 1
                if let key = slot.key, self.overlay.isEmpty || self.overlay[key] == nil {
                    return (key, slot.value)
                }
            }
            while let (key, value) = self.changes.next() {
                if let value {
                    return (key, value)
                }
            }
            return nil
        }
    }

    /// The user ids, in an unspecified order.
    public var keys: some Sequence<CutoffUserKey> { self.lazy.map(\.key) }

    /// The entries as a standard dictionary (for tests and the JSON writer; O(n) copies).
    public var dictionary: [CutoffUserKey: UserCutoffs] {
        var dictionary: [CutoffUserKey: UserCutoffs] = [:]
        dictionary.reserveCapacity(self.count)
        for (key, value) in self {
            dictionary[key] = value
        }
        return dictionary
    }

    /// Two versions that share a base compare their overlays, which skips every node they share: what differs
    /// between them. Otherwise every entry is looked up in the other map.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.base === rhs.base {
            return lhs.overlay == rhs.overlay
        }
        return lhs.allSatisfy { rhs[$0.key] == $0.value }
    }

    /// The count only: equal maps have equal counts, whatever their layout.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.count)
    }
}
