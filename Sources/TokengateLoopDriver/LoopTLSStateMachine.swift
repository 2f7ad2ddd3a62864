//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTLS

/// The TLS life of one client connection on the event loop — handshaking, open, closed — as a value with no
/// I/O: ``LoopTLSConnection`` hands it every event and does what it answers.
///
/// The handshake has a deadline (the listener's `handshake_timeout`): a peer that connects and stalls must
/// not keep a descriptor and an `SSL*` forever. A failed handshake, a record that does not decrypt, and a
/// socket error all close at once; a close_notify is answered with one before closing.
struct LoopTLSStateMachine {
    private enum State {
        case handshaking
        case open
        case closed
    }

    enum Action: Equatable {
        case none
        /// Take the next `SSL_do_handshake` step with the bytes just received.
        case continueHandshake
        /// The handshake completed: tell the owner, then decrypt what came with the client's last flight.
        case established
        /// Decrypt what arrived and hand the plaintext on.
        case decode
        /// Bytes after the end: drop them.
        case discardInput
        /// Answer the peer's close_notify, then close.
        case answerCloseNotifyAndClose
        case close
    }

    private var state = State.handshaking

    var isClosed: Bool {
        if case .closed = self.state { return true }
        return false
    }

    var isOpen: Bool {
        if case .open = self.state { return true }
        return false
    }

    /// Ciphertext arrived.
    func bytesReceived() -> Action {
        switch self.state {
        case .handshaking: .continueHandshake
        case .open: .decode
        case .closed: .discardInput
        }
    }

    /// One handshake step ended with `result`.
    mutating func handshakeStepped(_ result: TLSConnection.StepResult) -> Action {
        guard case .handshaking = self.state else { return .none }
        switch result {
        case .incomplete:
            return .none
        case .complete:
            self.state = .open
            return .established
        case .failed:
            self.state = .closed
            return .close
        }
    }

    /// The handshake deadline passed (a timer that fires after the handshake is ignored: timers have no cancel).
    mutating func handshakeTimedOut() -> Action {
        guard case .handshaking = self.state else { return .none }
        self.state = .closed
        return .close
    }

    /// The peer sent close_notify.
    mutating func closeNotifyReceived() -> Action {
        guard case .open = self.state else { return .none }
        self.state = .closed
        return .answerCloseNotifyAndClose
    }

    /// The owner closes the connection (after its last response), or the socket or a record failed.
    mutating func closeRequested() -> Action {
        switch self.state {
        case .handshaking, .open:
            self.state = .closed
            return .close
        case .closed:
            return .none
        }
    }
}
