//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers

/// Runs `operation` but returns (throwing `timeoutError()`) after `timeout` even if the operation has not finished.
///
/// Why not a task group: a task group waits for all its children, and an operation may not end at once when
/// cancelled (a blocking libpq call on a pool thread notices its interrupt only between C calls; an SQLite call
/// runs to its end). So the operation runs in its own task, is cancelled on timeout, and is left to finish in the
/// background while the caller goes on; its late result is dropped.
func withDeadline<T: Sendable>(
    _ timeout: Duration,
    timeoutError: @escaping @Sendable () -> any Error,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = DeadlineOutcome<T>()
    let work = Task {
        do {
            outcome.finish(.success(try await operation()))
        } catch {
            outcome.finish(.failure(error))
        }
    }
    let timer = Task {
        try? await Task.sleep(for: timeout)
        if !Task.isCancelled, outcome.finish(.failure(timeoutError())) {
            work.cancel()
        }
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
        try await outcome.wait()
    } onCancel: {
        work.cancel()
        outcome.finish(.failure(CancellationError()))
    }
}

/// The first of: the operation's result, the timeout, the caller's cancellation. Whoever comes first resumes the
/// waiting caller; later arrivals are ignored.
private final class DeadlineOutcome<T: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<T, any Error>)
        case finished(Result<T, any Error>)
        case delivered
    }

    private let state = NIOLockedValueBox<State>(.pending)

    /// Records `result` if nothing was recorded yet; returns whether it was.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (recorded, continuation): (Bool, CheckedContinuation<T, any Error>?) = self.state.withLockedValue { state in
            switch state {
            case .pending:
                state = .finished(result)
                return (true, nil)
            case .waiting(let continuation):
                state = .delivered
                return (true, continuation)
            case .finished, .delivered:
                return (false, nil)
            }
        }
        // Resumed outside the lock: resuming may run the caller's code synchronously.
        continuation?.resume(with: result)
        return recorded
    }

    func wait() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<T, any Error>? = self.state.withLockedValue { state in
                switch state {
                case .pending:
                    state = .waiting(continuation)
                    return nil
                case .finished(let result):
                    state = .delivered
                    return result
                case .waiting, .delivered:
                    preconditionFailure("DeadlineOutcome.wait() called twice")
                }
            }
            if let ready {
                continuation.resume(with: ready)
            }
        }
    }
}
