//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The base of a ``CutoffUserMap``: its users in ``shardCount`` flat tables (``CutoffUserTable``), the top
/// ``shardBits`` bits of a user's hash choosing the table.
///
/// ### Why several tables
/// The changes since the base was built are folded into it from time to time (``CutoffUserMap/foldStep()``). A
/// published base is never written (only its marks), so folding builds new tables, and the old ones live on until
/// the snapshots that hold them are released. With one table, that was a second copy of every user for a moment
/// (twice the table's memory at 10 million users); with 64, one fold rebuilds one table, a 64th of the users, and
/// the new base shares the 63 others with the old one.
///
/// ### Lookups
/// ``views`` holds each table's pointers in one flat array, so a lookup reads the table's memory without retaining
/// or releasing the table object (a reference count every request thread would otherwise write to).
final class CutoffUserBase: @unchecked Sendable {
    /// Bits of a hash that choose the table: 64 tables.
    @usableFromInline static let shardBits: UInt64 = 6
    static let shardCount = 1 << Int(shardBits)

    /// The tables, ``shardCount`` of them. Written in place only while one base and one map hold them (a build).
    private(set) var tables: [CutoffUserTable]
    /// ``tables``' views, in the same order; the tables keep their memory alive.
    @usableFromInline let views: UnsafeMutablePointer<CutoffUserTable.View>

    private init(tables: [CutoffUserTable]) {
        precondition(tables.count == Self.shardCount)
        self.tables = tables
        self.views = .allocate(capacity: Self.shardCount)
        self.views.initialize(from: tables.map(\.view), count: Self.shardCount)
    }

    deinit {
        self.views.deinitialize(count: Self.shardCount)
        self.views.deallocate()
    }

    /// A base of empty tables with room for about `minimumCount` users before any of them grows: each table a
    /// 64th, and a few percent more for the spread of a hash (at 10 million users, a table's count varies by about
    /// 0.25 %).
    convenience init(minimumCount: Int) {
        let each = minimumCount / Self.shardCount
        let room = minimumCount > 0 ? each + each / 32 + 4 : 0
        self.init(tables: (0..<Self.shardCount).map { _ in CutoffUserTable(minimumCount: room) })
    }

    /// The base every empty map starts with: one shared empty table in every place, no allocation.
    static let empty = CutoffUserBase(tables: Array(repeating: .empty, count: shardCount))

    /// The table of a key whose hash (``CutoffUserTable/hash(_:)``) is `hash`.
    @inline(__always)
    @usableFromInline
    static func shard(_ hash: UInt64) -> Int {
        Int(truncatingIfNeeded: hash &>> (64 &- Self.shardBits))
    }

    /// Users in every table.
    var count: Int {
        self.tables.reduce(0) { $0 + $1.count }
    }

    /// Whether the table at `shard` may be written in place: the caller holds the only reference to this base, and
    /// this base the only one to the table.
    func isWritable(_ shard: Int) -> Bool {
        isKnownUniquelyReferenced(&self.tables[shard])
    }

    /// Puts `table` in place of the one at `shard`. Only on a base that one map holds alone.
    func replace(_ shard: Int, with table: CutoffUserTable) {
        self.tables[shard] = table
        self.views[shard] = table.view
    }

    /// A new base with `table` at `shard` and this base's other tables, shared.
    func replacing(_ shard: Int, with table: CutoffUserTable) -> CutoffUserBase {
        var tables = self.tables
        tables[shard] = table
        return CutoffUserBase(tables: tables)
    }
}
