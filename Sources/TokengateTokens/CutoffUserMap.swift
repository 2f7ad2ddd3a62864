//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import HashTreeCollections

/// Every user's cutoffs: flat hash tables built once (``CutoffUserBase``, the base) and the changes since, in a
/// small persistent map (swift-collections' `TreeDictionary`, the overlay).
///
/// ### Why two levels
/// The sync service keeps the enforced table next to the snapshot it published, and requests may still hold older
/// snapshots, so a change must not copy the table: with a `Dictionary` the first write after a publish copied all of
/// it (0.34 s and twice the memory at 10 million users). A persistent map alone makes a change cheap but every lookup
/// walks one node per level, five at 10 million users, and building it node by node was most of a gateway's start.
/// Here a change copies the O(log k) overlay nodes on the way to the user (k: changes since the base was built) and
/// shares the base and the rest of the overlay with the published snapshot, and a lookup reads one run of slots in
/// the base, and the overlay only for a user whose home slot is marked as changed (``CutoffUserTable``, "Marks").
///
/// ### Building and folding
/// While one value holds the base (a store's first load, a file being read, before anything publishes it) and the
/// overlay is empty, writes go into the base in place, whose tables grow by doubling: one probe per row. Once the
/// overlay holds more than ``foldThreshold`` changes, ``foldStep()`` (which the sync service calls as it publishes)
/// folds the changes of one of the base's 64 tables into a new copy of that table, one table per call until all 64
/// are done: a 64th of the users is the most that exists twice at a time, while older snapshots hold the tables
/// they were published with. Should the overlay still grow to ``foldLimit`` (a resync that finds a great many rows
/// changed, a map nobody folds), the next change folds every table at once. A full reload merges the store's rows
/// into the map, so only the rows that differ join the overlay and a resync that finds what is enforced allocates
/// nothing.
///
/// ### Lookups
/// `subscript(_:)` hashes the key with the process-seeded `Hasher` (an attacker who picks user ids cannot aim them
/// at one run of slots) once for the base, reads the mark of the user's home slot and, only when it is set, hashes
/// the key again for the overlay: with 10,000 changes since the base was built, reading the overlay first for every
/// user had doubled a lookup's cost. No lock, no allocation.
///
/// ### Memory
/// A base slot is the key (16 bytes: a `String`, whose bytes are inline up to 15 UTF-8 bytes and otherwise in one
/// heap buffer) and the cutoffs (16 bytes, ``UserCutoffs``), plus a bit of marks; the tables are at most 7/10 and,
/// as built, about 2/3 full. See `docs/operations.md`, "Sizing the cutoff snapshot", for figures.
public struct CutoffUserMap: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: CutoffUserKey, value: UserCutoffs)

    private var base: CutoffUserBase
    /// The changes since the base was built: a user's cutoffs, or `nil` for a user of the base that was removed.
    /// Holds a user only where the map differs from the base.
    private var overlay: TreeDictionary<CutoffUserKey, UserCutoffs?>
    public private(set) var count: Int
    /// The next table ``foldStep()`` folds, while a fold of every table is under way.
    private var nextFold: Int?

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

    /// An empty map whose base has room for about `minimumCapacity` users before it grows.
    public init(minimumCapacity: Int) {
        self.base = minimumCapacity > 0 ? CutoffUserBase(minimumCount: minimumCapacity) : .empty
        self.overlay = [:]
        self.count = 0
    }

    /// The most users a size hint (``init(minimumCapacity:)`` from a store's count or estimate) reserves room for:
    /// 64 million (3 GiB of slots). A larger table grows as its rows arrive, so a wrong estimate cannot allocate
    /// more than that up front.
    public static let largestSizeHint: Int64 = 64_000_000

    /// How many changes the overlay holds before ``foldStep()`` starts folding them into the base: a 32nd of the
    /// users (at least 4,096), so folding costs a few percent of a change on average.
    var foldThreshold: Int {
        Swift.max(4_096, self.count / 32)
    }

    /// How many changes the overlay holds before the next change folds all of them at once (see the overview).
    var foldLimit: Int {
        self.foldThreshold * 8
    }

    /// The number of changes in the overlay (for tests and measurements).
    public var overlayCount: Int { self.overlay.count }

    /// The user's cutoffs, or `nil`; setting `nil` removes the user. See the type's overview for the costs.
    public subscript(user: CutoffUserKey) -> UserCutoffs? {
        @inline(__always) get {
            let hash = CutoffUserTable.hash(user)
            let table = self.base.views[CutoffUserBase.shard(hash)]
            let home = table.home(hash: hash)
            if !self.overlay.isEmpty, table.isMarked(home), let changed = self.overlay[user] {
                return changed
            }
            return table.find(user, home: home)
        }
        set {
            let hash = CutoffUserTable.hash(user)
            let shard = CutoffUserBase.shard(hash)
            if self.overlay.isEmpty, let newValue, self.tableIsWritable(shard) {
                var table = self.base.tables[shard]
                if table.isFull {
                    table = table.resized(minimumCount: table.count * 2)
                    self.base.replace(shard, with: table)
                }
                if table.insert(user, newValue) {
                    self.count += 1
                }
                return
            }
            let view = self.base.views[shard]
            let home = view.home(hash: hash)
            let inBase = view.find(user, home: home)
            let old = self.overlay.isEmpty ? inBase : (self.overlay[user] ?? inBase)
            if newValue == inBase {
                self.overlay.removeValue(forKey: user)
            } else {
                // Marked first: a lookup of this user must read the overlay from the moment it holds the change.
                view.mark(home)
                self.overlay[user] = .some(newValue)
            }
            self.count += (newValue == nil ? 0 : 1) - (old == nil ? 0 : 1)
            if self.overlay.count > self.foldLimit {
                for shard in 0..<CutoffUserBase.shardCount {
                    self.fold(shard)
                }
                self.nextFold = nil
            }
        }
    }

    /// Whether the table at `shard` may be written in place: this value holds the only reference to the base and
    /// the base the only one to the table (nothing published them), or the base is the shared empty one, which is
    /// then replaced by a base of this value's own.
    private mutating func tableIsWritable(_ shard: Int) -> Bool {
        if self.base === CutoffUserBase.empty {
            self.base = CutoffUserBase(minimumCount: 64 * CutoffUserBase.shardCount)
            return true
        }
        return isKnownUniquelyReferenced(&self.base) && self.base.isWritable(shard)
    }

    /// Folds the changes of one of the base's tables into a new copy of it, when the overlay holds more than
    /// ``foldThreshold`` changes or a fold of every table is under way: the sync service calls it each time it
    /// publishes, off the request path, so that the table it replaces is released with the snapshot before.
    /// O(users ÷ 64 + changes); 64 calls fold every table.
    /// - Returns: whether a table was folded.
    @discardableResult
    public mutating func foldStep() -> Bool {
        if self.nextFold == nil {
            guard self.overlay.count > self.foldThreshold else { return false }
            self.nextFold = 0
        }
        let shard = self.nextFold ?? 0
        self.nextFold = shard + 1 < CutoffUserBase.shardCount ? shard + 1 : nil
        self.fold(shard)
        return true
    }

    /// A new copy of the table at `shard` with the overlay's changes of its users written in (removals first, so
    /// that the copy never holds more than its users), those changes taken out of the overlay, and a new base that
    /// shares every other table with the old one.
    private mutating func fold(_ shard: Int) {
        var removed: [CutoffUserKey] = []
        var changed: [(key: CutoffUserKey, value: UserCutoffs)] = []
        for (key, value) in self.overlay where CutoffUserBase.shard(CutoffUserTable.hash(key)) == shard {
            if let value {
                changed.append((key, value))
            } else {
                removed.append(key)
            }
        }
        guard !removed.isEmpty || !changed.isEmpty else { return }
        let old = self.base.tables[shard]
        let table =
            old.hasRoom(for: changed.count + 1)
            ? old.copy() : old.resized(minimumCount: old.count + changed.count)
        for key in removed {
            table.remove(key)
            self.overlay.removeValue(forKey: key)
        }
        for (key, value) in changed {
            table.insert(key, value)
            self.overlay.removeValue(forKey: key)
        }
        self.base = self.base.replacing(shard, with: table)
    }

    /// Merges `batch` into this map, the later of each cutoff winning for a user already there: what a store's
    /// first load does with every row (``CutoffUserMapBuilder``). In place while nothing else holds the base: the
    /// rows are split by table, and each table's rows placed in the order of their slots.
    mutating func mergeLater(_ batch: [(key: CutoffUserKey, value: UserCutoffs)]) {
        guard self.overlay.isEmpty, self.tableIsWritable(0),
            (1..<CutoffUserBase.shardCount).allSatisfy({ self.base.isWritable($0) })
        else {
            for (key, value) in batch {
                let current = self[key] ?? UserCutoffs()
                var merged = value
                merged.storedRevokedBefore = Swift.max(current.storedRevokedBefore, value.storedRevokedBefore)
                merged.storedAPIRevokedBefore = Swift.max(current.storedAPIRevokedBefore, value.storedAPIRevokedBefore)
                self[key] = merged
            }
            return
        }
        var split = [[CutoffUserTable.Row]](repeating: [], count: CutoffUserBase.shardCount)
        for (key, value) in batch {
            let hash = CutoffUserTable.hash(key)
            split[CutoffUserBase.shard(hash)].append((key, value, hash))
        }
        for (shard, rows) in split.enumerated() where !rows.isEmpty {
            var table = self.base.tables[shard]
            if !table.hasRoom(for: rows.count) {
                table = table.resized(minimumCount: Swift.max(table.count * 2, table.count + rows.count))
                self.base.replace(shard, with: table)
            }
            table.mergeLater(rows)
        }
        self.count = self.base.count
    }

    public var isEmpty: Bool { self.count == 0 }

    public func makeIterator() -> Iterator {
        Iterator(map: self)
    }

    /// Visits the entries in an unspecified order: the base's, table by table (skipping users the overlay changed),
    /// then the overlay's.
    public struct Iterator: IteratorProtocol {
        private let base: CutoffUserBase
        private let overlay: TreeDictionary<CutoffUserKey, UserCutoffs?>
        private var shard = 0
        private var index = 0
        private var changes: TreeDictionary<CutoffUserKey, UserCutoffs?>.Iterator

        fileprivate init(map: CutoffUserMap) {
            self.base = map.base
            self.overlay = map.overlay
            self.changes = map.overlay.makeIterator()
        }

        public mutating func next() -> Element? {
            while self.shard < CutoffUserBase.shardCount {
                let table = self.base.views[self.shard]
                while self.index < table.capacity {
                    let slot = table.slots[self.index]
                    self.index += 1
                    if let key = slot.key,
                        self.overlay.isEmpty || !table.isMarked(table.home(hash: CutoffUserTable.hash(key)))
                            || self.overlay[key] == nil
                    {
                        return (key, slot.value)
                    }
                }
                self.shard += 1
                self.index = 0
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
