//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One borrowed connection with the deadline and interrupt of the call it serves: what the store's SQL code gets
/// inside ``PostgresCutoffStore/withConnection(_:)``.
///
/// Synchronous and blocking: it exists only on a thread of the store's thread pool, for the duration of one call.
/// Every statement shares the call's deadline, so a call of several statements (a transaction) is bounded as a
/// whole, not per statement.
struct PostgresSession {
    let connection: PostgresConnection
    let deadline: ContinuousClock.Instant
    let interrupt: PostgresInterrupt

    /// When set, each statement must also finish within this long from its own start.
    var statementTimeout: Duration? = nil

    /// The same connection where each statement must finish within `timeout` from its start, and all of them by the
    /// session's deadline: for a long call (a full load, under ``PostgresCutoffStore/Configuration/loadTimeout``)
    /// whose statements must each still fail by the ``PostgresCutoffStore/Configuration/operationTimeout`` when the
    /// server stops answering.
    func bounded(by timeout: Duration) -> PostgresSession {
        var session = self
        session.statementTimeout = timeout
        return session
    }

    /// The deadline of a statement starting now.
    private var statementDeadline: ContinuousClock.Instant {
        guard let timeout = self.statementTimeout else {
            return self.deadline
        }
        return min(self.deadline, ContinuousClock.now.advanced(by: timeout))
    }

    /// Runs one statement with text parameters and returns its rows.
    func query(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresFailure) -> PostgresRows {
        try self.connection.query(sql, parameters, deadline: self.statementDeadline, interrupt: self.interrupt)
    }

    /// Sends one statement without waiting for its results (``PostgresConnection/send(_:_:deadline:interrupt:)``);
    /// ``receive()`` must read them before anything else is sent.
    func send(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresFailure) {
        try self.connection.send(sql, parameters, deadline: self.statementDeadline, interrupt: self.interrupt)
    }

    /// The results of the statement ``send(_:_:)`` sent.
    func receive() throws(PostgresFailure) -> PostgresRows {
        try self.connection.receive(deadline: self.statementDeadline, interrupt: self.interrupt)
    }

    /// Runs one statement and ignores its rows.
    func execute(_ sql: String, _ parameters: [PostgresValue] = []) throws(PostgresFailure) {
        try self.connection.execute(sql, parameters, deadline: self.statementDeadline, interrupt: self.interrupt)
    }

    /// `BEGIN`, `body`, `COMMIT`; `ROLLBACK` when `body` throws. An error at `COMMIT` leaves the outcome unknown
    /// and is reported as unavailable: the caller may retry, and a retried forward-only write is harmless.
    ///
    /// If even `ROLLBACK` fails (the connection is gone or the deadline passed), the connection is left inside the
    /// transaction, so the pool drops it (``PostgresConnection/isReusable``) and the server rolls back when the
    /// socket closes.
    func transaction<T>(_ body: () throws -> T) throws -> T {
        try self.execute("BEGIN")
        let value: T
        do {
            value = try body()
        } catch {
            try? self.execute("ROLLBACK")
            throw error
        }
        try self.execute("COMMIT")
        return value
    }
}
