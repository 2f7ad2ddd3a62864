//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengatePQ

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq connection (`PGconn *`), owned by this object and finished (`PQfinish`) in `deinit`.
///
/// ### Threading
/// Every method blocks (in `poll()`, bounded by the caller's deadline and ``PostgresInterrupt``), so it runs only
/// on a thread of the store's `NIOThreadPool`, never on a Swift-concurrency cooperative thread or a NIO event
/// loop. libpq allows a connection on any thread but on one at a time; the pool hands a connection to exactly one
/// operation and takes it back after, so no two threads ever touch one `PGconn`.
///
/// ### Non-blocking libpq
/// The connection is made with `PQconnectStartParams`/`PQconnectPoll` and switched to non-blocking mode
/// (`PQsetnonblocking`) once up. Statements go out with `PQsendQueryParams` (the same text parameters as
/// `PQexecParams`, which would block without any bound) and results are collected with `PQconsumeInput`,
/// `PQisBusy` and `PQgetResult`, each wait being a `poll()` on `PQsocket` and the interrupt pipe up to the deadline.
/// So no call can hang on a dead server: at the deadline the connection is marked broken and dropped, and
/// dropping it closes the socket, which also ends the statement on the server (as does the session's
/// `statement_timeout`, see ``PostgresCutoffStore``). Non-blocking mode also makes `PQfinish` in `deinit` safe
/// on any thread: its goodbye message is sent without waiting.
final class PostgresConnection: @unchecked Sendable {
    // @unchecked Sendable: the only mutable state (`broken`) and the `PGconn` are touched by the one thread that
    // holds the connection (see Threading above); handing it over goes through the pool's lock, which orders the
    // memory accesses.
    private let handle: OpaquePointer
    private var broken = false

    private init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit {
        PQfinish(self.handle)
    }

    /// Whether the connection may go back to the pool: up, not broken by a timeout or an interrupt, and outside a
    /// transaction (a failed `COMMIT`/`ROLLBACK` can leave one open; such a connection is dropped, which makes
    /// the server roll back).
    var isReusable: Bool {
        !self.broken && PQstatus(self.handle) == CONNECTION_OK && PQtransactionStatus(self.handle) == PQTRANS_IDLE
    }

    /// Whether an idle pooled connection may be lent out, checked without waiting.
    ///
    /// A pooled connection does not `LISTEN`, so while idle the server has nothing to say to it, except when it
    /// is going away: a restart or an idle-session limit sends an error message and then closes the socket. Reading
    /// that is not enough to see it (`PQconsumeInput` reads the message but libpq marks the connection bad only
    /// when it reads the end of file, on a later call), so any byte waiting on an idle socket condemns the
    /// connection: the caller connects afresh, and a server restart costs no failed call. The rare harmless
    /// message (a `ParameterStatus` after a configuration reload) costs one reconnect.
    func isAliveWhileIdle() -> Bool {
        let socket = PQsocket(self.handle)
        guard !self.broken, socket >= 0, PQstatus(self.handle) == CONNECTION_OK else {
            return false
        }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Connects with keyword/value arrays (`PQconnectStartParams`, `expand_dbname` 0): no conninfo string is
    /// built, so no value needs quoting and a database name can never be read as a URL or as more settings.
    ///
    /// Ordering: `PQconnectStartParams` does the host name lookup synchronously (bounded by the resolver, not by
    /// `deadline`); then `PQconnectPoll` is called each time the socket is ready in the direction it asked for,
    /// reading `PQsocket` anew each round because it changes when libpq moves to the next address. libpq ignores
    /// `connect_timeout` in this mode, so `deadline` is the bound.
    static func connect(
        keywords: [String],
        values: [String],
        deadline: ContinuousClock.Instant,
        interrupt: PostgresInterrupt
    ) throws(PostgresFailure) -> PostgresConnection {
        let started = withCStringArray(keywords + [nil]) { keywords in
            withCStringArray(values + [nil]) { values in
                PQconnectStartParams(keywords, values, 0)
            }
        }
        guard let handle = started else {
            throw PostgresFailure(.connect, "libpq could not allocate a connection")
        }
        // From here on `connection` owns the handle: every exit finishes it in deinit.
        let connection = PostgresConnection(handle: handle)
        // Notices (`relation already exists, skipping` from `CREATE TABLE IF NOT EXISTS`) would go to stderr by
        // default; they carry nothing the store acts on.
        PQsetNoticeProcessor(handle, { _, _ in }, nil)
        guard PQstatus(handle) != CONNECTION_BAD else {
            throw PostgresFailure(.connect, "cannot connect", detail: connection.errorMessage)
        }
        var polling = PGRES_POLLING_WRITING
        while polling != PGRES_POLLING_OK {
            if polling == PGRES_POLLING_FAILED {
                throw PostgresFailure(.connect, "cannot connect", detail: connection.errorMessage)
            }
            let events = polling == PGRES_POLLING_READING ? Int16(POLLIN) : Int16(POLLOUT)
            do throws(PostgresFailure) {
                try connection.wait(events, deadline: deadline, interrupt: interrupt)
            } catch {
                // The wait's own failure says "timed out" or "interrupted"; while connecting that means this.
                throw PostgresFailure(error.kind == .timeout ? .connect : error.kind, "\(error.summary) while connecting")
            }
            polling = PQconnectPoll(handle)
        }
        guard PQsetnonblocking(handle, 1) == 0 else {
            throw PostgresFailure(.connect, "cannot switch the connection to non-blocking mode")
        }
        return connection
    }

    /// Sends one statement with text parameters and collects its rows.
    ///
    /// Ordering, as libpq requires for a non-blocking connection: `PQsendQueryParams` queues the statement;
    /// `PQflush` is repeated until it returns 0, waiting for the socket in between (for reading too, with
    /// `PQconsumeInput`, so a server that talks while we send cannot deadlock us); then results are taken with
    /// `PQgetResult` only while `PQisBusy` says one is complete (else `PQgetResult` would block), waiting and
    /// calling `PQconsumeInput` otherwise, until `PQgetResult` returns NULL. Every `PGresult` is cleared.
    /// A server error does not end the loop early: the remaining results must be drained so the connection can
    /// take the next statement.
    ///
    /// - Throws: ``PostgresFailure`` of kind `server` (connection still usable), or `timeout`, `interrupted`,
    ///   `connectionLost` (connection broken, dropped by the pool).
    func query(
        _ sql: String,
        _ parameters: [PostgresValue] = [],
        deadline: ContinuousClock.Instant,
        interrupt: PostgresInterrupt
    ) throws(PostgresFailure) -> PostgresRows {
        try self.send(sql, parameters, deadline: deadline, interrupt: interrupt)
        return try self.receive(deadline: deadline, interrupt: interrupt)
    }

    /// The first half of ``query(_:_:deadline:interrupt:)``: queues and sends one statement without waiting for its
    /// results, which ``receive(deadline:interrupt:)`` then reads before anything else is sent. A full load sends the
    /// next `FETCH` before it merges the rows of the last, so the server reads while the gateway merges.
    func send(
        _ sql: String,
        _ parameters: [PostgresValue] = [],
        deadline: ContinuousClock.Instant,
        interrupt: PostgresInterrupt
    ) throws(PostgresFailure) {
        guard !self.broken, PQstatus(self.handle) == CONNECTION_OK else {
            self.broken = true
            throw PostgresFailure(.connectionLost, "the connection is down", detail: self.errorMessage)
        }
        guard parameters.allSatisfy(\.isCString) else {
            throw PostgresFailure(.unexpectedResult, "a parameter contains a NUL byte")
        }
        let types = parameters.map(\.typeOID)
        let sent = types.withUnsafeBufferPointer { types in
            withCStringArray(parameters.map(\.textFormat)) { values in
                // Lengths and formats NULL: all parameters are NUL-terminated text. Result format 0: text.
                PQsendQueryParams(
                    self.handle, sql, Int32(parameters.count), types.baseAddress, values, nil, nil, 0)
            }
        }
        guard sent == 1 else {
            self.broken = true
            throw PostgresFailure(.connectionLost, "cannot send a statement", detail: self.errorMessage)
        }
        do throws(PostgresFailure) {
            try self.flush(deadline: deadline, interrupt: interrupt)
        } catch {
            // A statement may still be in flight, and its results would be read as the next one's.
            self.broken = true
            throw error
        }
    }

    /// The second half of ``query(_:_:deadline:interrupt:)``: every result of the statement ``send(_:_:deadline:interrupt:)``
    /// sent, its rows collected.
    func receive(deadline: ContinuousClock.Instant, interrupt: PostgresInterrupt) throws(PostgresFailure) -> PostgresRows {
        do throws(PostgresFailure) {
            return try self.collect(deadline: deadline, interrupt: interrupt)
        } catch {
            if error.kind != .server {
                // A statement may still be in flight, and its results would be read as the next one's.
                self.broken = true
            }
            throw error
        }
    }

    /// Runs `query` and ignores its rows.
    func execute(
        _ sql: String,
        _ parameters: [PostgresValue] = [],
        deadline: ContinuousClock.Instant,
        interrupt: PostgresInterrupt
    ) throws(PostgresFailure) {
        _ = try self.query(sql, parameters, deadline: deadline, interrupt: interrupt)
    }

    /// Waits (without a deadline) until the server sends something or `interrupt` fires, reads it, and returns
    /// the notifications received: the LISTEN thread's loop body.
    ///
    /// Ordering: `PQconsumeInput` first moves whatever arrived into libpq's buffer; only then does `PQnotifies`
    /// see the notifications, each of which is copied out and freed with `PQfreemem` at once. Notifications that
    /// arrived with an earlier result (the `LISTEN` itself) are already buffered, so the caller drains once with
    /// ``takeNotifications()`` before the first wait.
    func waitForNotifications(interrupt: PostgresInterrupt) throws(PostgresFailure) -> [String] {
        do throws(PostgresFailure) {
            try self.wait(Int16(POLLIN), deadline: nil, interrupt: interrupt)
        } catch {
            self.broken = true
            throw error
        }
        guard PQconsumeInput(self.handle) == 1, PQstatus(self.handle) == CONNECTION_OK else {
            self.broken = true
            throw PostgresFailure(.connectionLost, "the connection was lost", detail: self.errorMessage)
        }
        return self.takeNotifications()
    }

    /// The payloads of the notifications libpq has buffered.
    func takeNotifications() -> [String] {
        var payloads: [String] = []
        while let notification = PQnotifies(self.handle) {
            defer { PQfreemem(notification) }
            payloads.append(notification.pointee.extra.map { String(cString: $0) } ?? "")
        }
        return payloads
    }

    // MARK: Waiting and collecting.

    /// `PQflush` until everything is sent.
    private func flush(deadline: ContinuousClock.Instant, interrupt: PostgresInterrupt) throws(PostgresFailure) {
        while true {
            switch PQflush(self.handle) {
            case 0:
                return
            case 1:
                let ready = try self.wait(Int16(POLLIN) | Int16(POLLOUT), deadline: deadline, interrupt: interrupt)
                if ready & Int16(POLLIN) != 0, PQconsumeInput(self.handle) == 0 {
                    throw PostgresFailure(.connectionLost, "the connection was lost", detail: self.errorMessage)
                }
            default:
                throw PostgresFailure(.connectionLost, "cannot send a statement", detail: self.errorMessage)
            }
        }
    }

    /// Reads every result of the statement sent; see ``query(_:_:deadline:interrupt:)``.
    private func collect(
        deadline: ContinuousClock.Instant,
        interrupt: PostgresInterrupt
    ) throws(PostgresFailure) -> PostgresRows {
        var rows = PostgresRows.none
        var failure: PostgresFailure?
        while true {
            while PQisBusy(self.handle) == 1 {
                try self.wait(Int16(POLLIN), deadline: deadline, interrupt: interrupt)
                guard PQconsumeInput(self.handle) == 1 else {
                    throw PostgresFailure(.connectionLost, "the connection was lost", detail: self.errorMessage)
                }
            }
            guard let result = PQgetResult(self.handle) else {
                break
            }
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            if status == PGRES_TUPLES_OK {
                rows = Self.rows(of: result)
            } else if status == PGRES_COMMAND_OK || status == PGRES_EMPTY_QUERY {
                continue
            } else if status == PGRES_FATAL_ERROR || status == PGRES_NONFATAL_ERROR {
                failure = failure ?? Self.serverFailure(result)
            } else {
                // COPY, pipeline or single-row states: never asked for. A COPY would have to be ended before the
                // connection could be used again, so it is treated as broken.
                let name = PQresStatus(status).map { String(cString: $0) } ?? "\(status.rawValue)"
                throw PostgresFailure(.unexpectedResult, "unexpected result status \(name)")
            }
        }
        if PQstatus(self.handle) != CONNECTION_OK {
            throw PostgresFailure(.connectionLost, "the connection was lost", detail: self.errorMessage)
        }
        if let failure {
            throw failure
        }
        return rows
    }

    /// Waits until the socket is ready for `events`, the deadline passes, or `interrupt` fires; returns the
    /// socket's `revents`. `POLLERR`/`POLLHUP` count as ready: the next libpq call finds out what happened.
    @discardableResult
    private func wait(
        _ events: Int16,
        deadline: ContinuousClock.Instant?,
        interrupt: PostgresInterrupt
    ) throws(PostgresFailure) -> Int16 {
        let socket = PQsocket(self.handle)
        guard socket >= 0 else {
            throw PostgresFailure(.connectionLost, "the connection has no socket", detail: self.errorMessage)
        }
        var descriptors = [
            pollfd(fd: socket, events: events, revents: 0),
            pollfd(fd: interrupt.descriptor, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero else {
                    throw PostgresFailure(.timeout, "timed out")
                }
                timeout = remaining.pollMilliseconds
            }
            let ready = poll(&descriptors, 2, timeout)
            if ready < 0 {
                let code = errno
                if code == EINTR {
                    continue
                }
                throw PostgresFailure(.connectionLost, "poll() failed (errno \(code))")
            }
            if descriptors[1].revents != 0 || interrupt.isFired {
                throw PostgresFailure(.interrupted, "interrupted")
            }
            if descriptors[0].revents != 0 {
                return descriptors[0].revents
            }
        }
    }

    /// `PQerrorMessage`: libpq's own text, for the log only (see ``PostgresFailure``).
    private var errorMessage: String? {
        PQerrorMessage(self.handle).map { String(cString: $0) }
    }

    private static func rows(of result: OpaquePointer) -> PostgresRows {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var values: [String?] = []
        values.reserveCapacity(rowCount * columnCount)
        for row in 0..<rowCount {
            for column in 0..<columnCount {
                // PQgetvalue gives "" for NULL; only PQgetisnull tells the two apart. The length is libpq's, so
                // the bytes are not scanned for their end twice.
                if PQgetisnull(result, Int32(row), Int32(column)) == 1 {
                    values.append(nil)
                } else if let value = PQgetvalue(result, Int32(row), Int32(column)) {
                    let length = Int(PQgetlength(result, Int32(row), Int32(column)))
                    values.append(
                        value.withMemoryRebound(to: UInt8.self, capacity: length) {
                            String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self)
                        })
                } else {
                    values.append("")
                }
            }
        }
        return PostgresRows(columns: columnCount, count: rowCount, values: values)
    }

    /// The SQLSTATE goes into the summary (stable, says what kind of failure); the server's message is detail.
    private static func serverFailure(_ result: OpaquePointer) -> PostgresFailure {
        // PG_DIAG_SQLSTATE and PG_DIAG_MESSAGE_PRIMARY are the character constants 'C' and 'M'.
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        let message = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
        return PostgresFailure(
            .server, "the server refused a statement (SQLSTATE \(state ?? "unknown"))", detail: message,
            sqlState: state)
    }
}

/// Calls `body` with a C array of C strings (`const char *const *`) that lives only during the call. `nil`
/// entries stay NULL (the terminator `PQconnectStartParams` needs); an empty list passes NULL.
private func withCStringArray<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R) -> R {
    let copies: [UnsafeMutablePointer<CChar>?] = strings.map { string in
        string.map { string in
            guard let copy = strdup(string) else {
                fatalError("out of memory copying a PostgreSQL parameter")
            }
            return copy
        }
    }
    defer {
        for copy in copies {
            free(copy)
        }
    }
    let pointers = copies.map { UnsafePointer($0) }
    return pointers.withUnsafeBufferPointer { buffer in
        body(buffer.isEmpty ? nil : buffer.baseAddress)
    }
}
