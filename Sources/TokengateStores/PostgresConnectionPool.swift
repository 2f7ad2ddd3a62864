//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers

/// At most `maxConnections` libpq connections, lent to one operation at a time.
///
/// The pool only does the bookkeeping, under a lock and without blocking; connecting and every libpq call happen
/// on the store's thread pool (see ``PostgresConnection``). A caller gets a ``Lease``: an idle connection, or a
/// reserved slot for which it connects itself. Every lease must be given back exactly once with
/// ``giveBack(_:)``, with the connection if it is still reusable or `nil` (connect failed, connection broken), so
/// the slot is freed and the next waiter served.
///
/// Until ``start()`` (``PostgresCutoffStore/run()``) callers wait, as the store's contract says calls need `run()`;
/// after ``close()`` they fail at once.
final class PostgresConnectionPool: Sendable {
    enum Lease: Sendable {
        case idle(PostgresConnection)
        /// A slot is reserved; connect and give the connection (or `nil`) back.
        case connect
    }

    private let state: NIOLockedValueBox<StateMachine>

    init(maxConnections: Int) {
        self.state = NIOLockedValueBox(StateMachine(maxConnections: max(1, maxConnections)))
    }

    /// A connection or a slot; waits while all are lent. Cancellation ends the wait with `CancellationError`.
    func lease() async throws -> Lease {
        let id = self.state.withLockedValue { $0.nextWaiterID() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Lease, any Error>) in
                let action = self.state.withLockedValue { $0.lease(id: id, continuation: continuation) }
                self.run(action)
            }
        } onCancel: {
            let action = self.state.withLockedValue { $0.cancel(id: id) }
            self.run(action)
        }
    }

    /// Returns a lease: the connection when ``PostgresConnection/isReusable``, else `nil`.
    func giveBack(_ connection: PostgresConnection?) {
        let action = self.state.withLockedValue {
            $0.giveBack(connection.flatMap { $0.isReusable ? $0 : nil })
        }
        self.run(action)
    }

    /// Lets waiting and later callers in.
    func start() {
        let actions = self.state.withLockedValue { $0.start() }
        for action in actions {
            self.run(action)
        }
    }

    /// Fails every waiter and drops the idle connections; leases out now are dropped when given back.
    func close() {
        let (waiters, idle) = self.state.withLockedValue { $0.close() }
        // Resumed and released outside the lock: resuming runs the waiter's code, and deinit calls PQfinish.
        for waiter in waiters {
            waiter.resume(throwing: StateMachine.closedError)
        }
        _ = idle
    }

    /// Resumes outside the lock, as a resumed continuation may run code at once.
    private func run(_ action: StateMachine.Action) {
        switch action {
        case .none:
            break
        case .resume(let continuation, let lease):
            continuation.resume(returning: lease)
        case .fail(let continuation, let error):
            continuation.resume(throwing: error)
        case .drop(let connection):
            // Released here, outside the lock: its deinit calls PQfinish (non-blocking; see PostgresConnection).
            _ = connection
        }
    }
}

// MARK: The bookkeeping, as a value: events in, actions out.

extension PostgresConnectionPool {
    struct StateMachine {
        enum Action {
            case none
            case resume(CheckedContinuation<Lease, any Error>, Lease)
            case fail(CheckedContinuation<Lease, any Error>, any Error)
            case drop(PostgresConnection)
        }

        private enum Phase {
            case notStarted
            case running
            case closed
        }

        static let closedError = CutoffStoreError(code: .storeUnavailable, message: "the store is closed")

        private let maxConnections: Int
        private var phase = Phase.notStarted
        private var idle: [PostgresConnection] = []
        /// Connections lent out or being connected, plus idle ones: never more than `maxConnections`.
        private var open = 0
        /// In arrival order.
        private var waiters: [(id: UInt64, continuation: CheckedContinuation<Lease, any Error>)] = []
        /// Ids handed out whose caller has not reached ``lease(id:continuation:)`` yet. Cancellation can run
        /// before that; it removes the id, and the arriving caller then fails at once instead of waiting.
        private var notArrived: Set<UInt64> = []
        private var lastID: UInt64 = 0

        init(maxConnections: Int) {
            self.maxConnections = maxConnections
        }

        mutating func nextWaiterID() -> UInt64 {
            self.lastID += 1
            self.notArrived.insert(self.lastID)
            return self.lastID
        }

        mutating func lease(id: UInt64, continuation: CheckedContinuation<Lease, any Error>) -> Action {
            guard self.notArrived.remove(id) != nil else {
                return .fail(continuation, CancellationError())
            }
            switch self.phase {
            case .closed:
                return .fail(continuation, Self.closedError)
            case .notStarted:
                self.waiters.append((id, continuation))
                return .none
            case .running:
                if let lease = self.takeLease() {
                    return .resume(continuation, lease)
                }
                self.waiters.append((id, continuation))
                return .none
            }
        }

        mutating func cancel(id: UInt64) -> Action {
            if self.notArrived.remove(id) != nil {
                return .none
            }
            guard let index = self.waiters.firstIndex(where: { $0.id == id }) else {
                // Served already: the caller holds the lease and gives it back.
                return .none
            }
            let waiter = self.waiters.remove(at: index)
            return .fail(waiter.continuation, CancellationError())
        }

        mutating func giveBack(_ connection: PostgresConnection?) -> Action {
            switch self.phase {
            case .closed:
                self.open -= 1
                return connection.map { .drop($0) } ?? .none
            case .notStarted, .running:
                break
            }
            if !self.waiters.isEmpty {
                let waiter = self.waiters.removeFirst()
                // The slot passes straight to the waiter: `open` stays the same.
                return .resume(waiter.continuation, connection.map { .idle($0) } ?? .connect)
            }
            if let connection {
                self.idle.append(connection)
            } else {
                self.open -= 1
            }
            return .none
        }

        mutating func start() -> [Action] {
            guard case .notStarted = self.phase else {
                return []
            }
            self.phase = .running
            var actions: [Action] = []
            while !self.waiters.isEmpty, let lease = self.takeLease() {
                actions.append(.resume(self.waiters.removeFirst().continuation, lease))
            }
            return actions
        }

        mutating func close() -> ([CheckedContinuation<Lease, any Error>], [PostgresConnection]) {
            self.phase = .closed
            let waiters = self.waiters.map(\.continuation)
            let idle = self.idle
            self.waiters = []
            self.idle = []
            self.open -= idle.count
            return (waiters, idle)
        }

        private mutating func takeLease() -> Lease? {
            if let connection = self.idle.popLast() {
                return .idle(connection)
            }
            if self.open < self.maxConnections {
                self.open += 1
                return .connect
            }
            return nil
        }
    }
}
