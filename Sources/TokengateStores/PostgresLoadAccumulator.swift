//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// Collects the rows of ``PostgresCutoffStore``'s full load (merged forward onto a base table as they arrive,
/// ``CutoffTable/mergeForward(_:_:)``) or of a read of its change feed: rows of
/// ``PostgresCutoffStore/Statements/load``'s shape.
struct PostgresLoadAccumulator {
    var table: CutoffTable
    var sawGlobalRow = false
    /// With `collectingChanges`, the user rows in the order read, instead of merged into ``table``.
    var changes: [(user: CutoffUserKey, cutoffs: UserCutoffs, sequence: Int64)] = []
    let hasFeed: Bool
    let collectingChanges: Bool

    /// A first load's users (no base to merge onto), placed in batches (``CutoffUserMapBuilder``); moved into
    /// ``table`` by ``finishBuilding()``.
    var builder: CutoffUserMapBuilder?

    init(base: CutoffTable?, hasFeed: Bool, collectingChanges: Bool = false) {
        self.table = base ?? CutoffTable()
        self.hasFeed = hasFeed
        self.collectingChanges = collectingChanges
        self.builder = base == nil && !collectingChanges ? CutoffUserMapBuilder() : nil
    }

    /// Moves the users built so far into ``table``.
    mutating func finishBuilding() {
        if var builder = self.builder.take() {
            self.table.users = builder.finish()
        }
    }

    mutating func add(_ rows: PostgresRows) throws(PostgresFailure) {
        try rows.expectColumns(5)
        for row in 0..<rows.count {
            let kind = try rows.int64(row, 0)
            let first = try rows.int64(row, 2)
            let second = try rows.int64(row, 3)
            if kind == 0 {
                self.sawGlobalRow = true
                self.table.globalRevokedBefore = CutoffTable.later(self.table.globalRevokedBefore, first)
                self.table.forceEpoch = second ?? 0
                // A store id only once version 2 added it; without one (RP-table mode, or a schema this instance
                // could not upgrade) there is no feed, and the sync service reloads whole tables.
                if self.hasFeed, let id = rows.text(row, 1), !id.isEmpty, let sequence = try rows.int64(row, 4) {
                    self.table.position = CutoffFeedPosition(feed: "postgres:\(id)", sequence: sequence)
                } else {
                    self.table.position = nil
                }
            } else if let user = rows.text(row, 1), !user.isEmpty {
                // An RP table without a unique user id may hold a user twice; the later cutoffs win, the rule that
                // merges onto the base table too.
                let cutoffs = UserCutoffs(revokedBefore: first, apiRevokedBefore: second)
                if self.collectingChanges {
                    self.changes.append((CutoffUserKey(user), cutoffs, try rows.int64(row, 4) ?? 0))
                } else if self.builder != nil {
                    self.builder?.add(CutoffUserKey(user), cutoffs)
                } else {
                    self.table.mergeForward(CutoffUserKey(user), cutoffs)
                }
            }
        }
    }
}
