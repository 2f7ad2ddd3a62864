//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Builds a ``CutoffUserMap`` from a store's rows, as a gateway's start reads them: rows are collected in batches
/// and each batch is placed in the order of its slots (``CutoffUserTable/mergeLater(_:)``), so building the table
/// of ten million users sweeps through memory instead of missing the caches once per row.
///
/// A user that comes twice keeps the later of each cutoff (fail closed), the rule of a reload merged onto the table
/// in force. The batch holds at most ``batchRows`` rows (2.5 MiB), so the build needs little more than the table.
public struct CutoffUserMapBuilder: Sendable {
    private var map: CutoffUserMap
    private var batch: [(key: CutoffUserKey, value: UserCutoffs)] = []

    /// Rows collected before they are placed.
    static let batchRows = 65_536

    /// A builder whose table has room for `expectedCount` users (a store's count or estimate; at most
    /// ``CutoffUserMap/largestSizeHint``) before it grows.
    public init(expectedCount: Int = 0) {
        self.map = CutoffUserMap(minimumCapacity: Swift.min(expectedCount, Int(CutoffUserMap.largestSizeHint)))
        self.batch.reserveCapacity(Swift.min(Swift.max(expectedCount, 16), Self.batchRows))
    }

    /// Adds one row.
    public mutating func add(_ user: CutoffUserKey, _ cutoffs: UserCutoffs) {
        self.batch.append((user, cutoffs))
        if self.batch.count >= Self.batchRows {
            self.map.mergeLater(self.batch)
            self.batch.removeAll(keepingCapacity: true)
        }
    }

    /// The map of every row added.
    public mutating func finish() -> CutoffUserMap {
        if !self.batch.isEmpty {
            self.map.mergeLater(self.batch)
            self.batch = []
        }
        return self.map
    }
}
