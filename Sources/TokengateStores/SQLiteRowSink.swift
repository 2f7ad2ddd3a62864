//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Where the rows of one SQLite statement are collected: a box the row callback writes without a lock.
///
/// SQLiteNIO calls a query's row callback on one thread-pool thread, one row after the other, and the `async`
/// query returns only after the last; the caller reads ``value`` after that return, which orders every write
/// before the read. A lock per row (`NIOLockedValueBox`) cost a lock and an unlock for each of ten million rows of
/// a full load, a tenth of a gateway's start. Only for that pattern: one statement, read after it returned.
final class SQLiteRowSink<Value>: @unchecked Sendable {
    var value: Value

    init(_ value: Value) {
        self.value = value
    }
}
