//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
internal import SQLiteNIO

/// Connections whose close failed even after retries (see ``SQLiteCutoffStore/closeCompletely(_:logger:)``).
///
/// Holding them for the life of the process is deliberate: releasing an open `SQLiteConnection` asserts in debug
/// builds and leaks its handle in release builds, so the only choice left is to leak it visibly and on purpose.
enum UnclosableSQLiteConnections {
    private static let kept = NIOLockedValueBox<[SQLiteConnection]>([])

    static func keep(_ sqlite: SQLiteConnection) {
        self.kept.withLockedValue { $0.append(sqlite) }
    }
}
