//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTLS

/// A client connection's life on the epoll floor, as a value: events in, actions out. No OpenSSL and no I/O
/// here; ``FloorClientConnection/run(_:)`` performs the actions.
///
/// ```
/// handshaking ──handshake done──▶ active ──peer close_notify (answered) / EOF / failure──▶ closed
///      └── failure / timeout / EOF ────────────────────────────────────────────────────────▶ closed
/// ```
/// The same states as the gateway's TLS handler, without its `closing` (the floor never starts a close of its
/// own: it only follows the client's or the backend's).
struct FloorConnectionStateMachine {
    private enum State {
        case handshaking
        case active
        case closed
    }

    enum Action: Equatable {
        case none
        /// Take the next `SSL_do_handshake` step with the bytes just received.
        case continueHandshake
        /// Decrypt what arrived and pass whole request heads upstream.
        case decode
        /// Bytes after the end: drop them.
        case discardInput
        /// Answer the client's close_notify, then close both connections.
        case answerCloseNotifyAndClose
        /// Close both connections.
        case close
    }

    private var state = State.handshaking

    var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    /// Ciphertext arrived from the client.
    func bytesReceived() -> Action {
        switch self.state {
        case .handshaking: return .continueHandshake
        case .active: return .decode
        case .closed: return .discardInput
        }
    }

    /// One handshake step ended with `result`. On completion, data that came with the client's last flight
    /// may already be waiting, so the answer is to decode at once.
    mutating func handshakeStepped(_ result: TLSConnection.StepResult) -> Action {
        switch (self.state, result) {
        case (.handshaking, .incomplete):
            return .none
        case (.handshaking, .complete):
            self.state = .active
            return .decode
        case (.handshaking, .failed):
            self.state = .closed
            return .close
        case (.active, _), (.closed, _):
            return .none
        }
    }

    /// The handshake deadline passed.
    mutating func handshakeTimedOut() -> Action {
        switch self.state {
        case .handshaking:
            self.state = .closed
            return .close
        case .active, .closed:
            return .none
        }
    }

    /// The client sent close_notify.
    mutating func closeNotifyReceived() -> Action {
        switch self.state {
        case .active:
            self.state = .closed
            return .answerCloseNotifyAndClose
        case .handshaking, .closed:
            return .none
        }
    }

    /// A socket of the pair ended or failed, or a TLS record could not be decrypted or encrypted.
    mutating func failed() -> Action {
        switch self.state {
        case .handshaking, .active:
            self.state = .closed
            return .close
        case .closed:
            return .none
        }
    }
}
