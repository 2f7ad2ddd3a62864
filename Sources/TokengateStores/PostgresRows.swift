//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The rows of one statement, copied out of the `PGresult` in text format before it is cleared.
///
/// Text format because every value the store reads is a `bigint`, `text` or `boolean`, whose text forms are exact
/// and trivially parsed; a value that does not parse is ``PostgresFailure/Kind/unexpectedResult``, never a guess.
struct PostgresRows: Sendable {
    /// Column count of the result (0 for a statement without rows).
    let columns: Int
    /// Row count of the result.
    let count: Int
    /// The values row after row (`columns` per row), in one array: a full load reads ten million rows, and an array
    /// per row was ten million allocations. `nil` is SQL `NULL`.
    let values: [String?]

    static let none = PostgresRows(columns: 0, count: 0, values: [])

    /// Checks the shape before any value is read, so a statement that returns fewer columns than expected fails
    /// cleanly instead of trapping on an index.
    func expectColumns(_ expected: Int) throws(PostgresFailure) {
        guard self.count == 0 || self.columns == expected else {
            throw PostgresFailure(
                .unexpectedResult, "a statement returned \(self.columns) columns instead of \(expected)")
        }
    }

    func text(_ row: Int, _ column: Int) -> String? {
        self.values[row * self.columns + column]
    }

    func int64(_ row: Int, _ column: Int) throws(PostgresFailure) -> Int64? {
        guard let text = self.values[row * self.columns + column] else {
            return nil
        }
        guard let value = Int64(text) else {
            throw PostgresFailure(.unexpectedResult, "a column holds a value of an unexpected type")
        }
        return value
    }

    func bool(_ row: Int, _ column: Int) throws(PostgresFailure) -> Bool? {
        switch self.values[row * self.columns + column] {
        case nil:
            return nil
        case "t":
            return true
        case "f":
            return false
        case .some:
            throw PostgresFailure(.unexpectedResult, "a column holds a value of an unexpected type")
        }
    }
}
