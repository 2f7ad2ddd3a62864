//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

extension TLSHandler {
    /// The connection's life, as a value: events in, actions out. No OpenSSL and no I/O here; the handler
    /// performs the actions.
    ///
    /// ```
    /// idle ──start──▶ handshaking ──done──▶ active ──close()──▶ closing ──peer close_notify / timeout──▶ closed
    ///                     │                    │ peer close_notify (we answer) ───────────────────────────▶ closed
    ///                     └── failure / timeout / EOF / close() ─────────────────────────────────────────▶ closed
    /// ```
    struct StateMachine {
        enum State {
            /// Added to the pipeline; the channel is not active yet.
            case idle
            /// `SSL_do_handshake` is in progress; writes are buffered.
            case handshaking
            /// Application data flows both ways.
            case active
            /// Our close_notify is out; waiting (bounded) for the peer's. Carries the close promise.
            case closing(EventLoopPromise<Void>?)
            /// Nothing more goes through OpenSSL.
            case closed
        }

        enum ReadAction: Equatable {
            case continueHandshake
            case decode
            /// Closing: decrypt only to find the peer's close_notify; plaintext is dropped.
            case decodeAndDiscard
            case ignore
        }

        enum FlushAction: Equatable {
            case unbufferWrites
            /// Keep the writes (and the flush mark) until the handshake completes.
            case waitForHandshake
            case failWrites
        }

        enum CloseAction {
            /// No TLS session to close: close the channel now.
            case closeChannel(EventLoopPromise<Void>?)
            case sendCloseNotify
            /// Already closing; the promise was chained to the pending close.
            case none
        }

        enum CloseNotifyAction {
            /// The peer closed first: send ours, report, close.
            case answerAndClose
            /// We closed first and the peer answered: report, close with the pending promise.
            case close(EventLoopPromise<Void>?)
            case none
        }

        enum InactiveAction {
            case none
            case reportHandshakeEOF
            case reportUncleanShutdown
            case succeedClose(EventLoopPromise<Void>?)
        }

        private(set) var state: State = .idle

        var isActive: Bool {
            if case .active = self.state {
                return true
            }
            return false
        }

        /// Whether writes may still be accepted (they are buffered until flushed or the handshake ends).
        var acceptsWrites: Bool {
            switch self.state {
            case .idle, .handshaking, .active:
                return true
            case .closing, .closed:
                return false
            }
        }

        /// Returns `true` when the handshake should start now.
        mutating func startHandshake() -> Bool {
            switch self.state {
            case .idle:
                self.state = .handshaking
                return true
            case .handshaking, .active, .closing, .closed:
                return false
            }
        }

        /// Returns `true` when the completion should be reported (the handshake was still wanted).
        mutating func handshakeCompleted() -> Bool {
            switch self.state {
            case .handshaking:
                self.state = .active
                return true
            case .idle, .active, .closing, .closed:
                return false
            }
        }

        /// Returns `true` when the timeout applies (the handshake is still running).
        mutating func handshakeTimedOut() -> Bool {
            switch self.state {
            case .handshaking:
                self.state = .closed
                return true
            case .idle, .active, .closing, .closed:
                return false
            }
        }

        mutating func channelRead() -> ReadAction {
            switch self.state {
            case .idle:
                // Bytes before channelActive (possible in tests): start the handshake with them.
                self.state = .handshaking
                return .continueHandshake
            case .handshaking:
                return .continueHandshake
            case .active:
                return .decode
            case .closing:
                return .decodeAndDiscard
            case .closed:
                return .ignore
            }
        }

        func flush() -> FlushAction {
            switch self.state {
            case .idle, .handshaking:
                return .waitForHandshake
            case .active:
                return .unbufferWrites
            case .closing, .closed:
                return .failWrites
            }
        }

        mutating func close(promise: EventLoopPromise<Void>?) -> CloseAction {
            switch self.state {
            case .idle, .handshaking, .closed:
                self.state = .closed
                return .closeChannel(promise)
            case .active:
                self.state = .closing(promise)
                return .sendCloseNotify
            case .closing(let pending):
                if let pending, let promise {
                    pending.futureResult.cascade(to: promise)
                    return .none
                }
                self.state = .closing(pending ?? promise)
                return .none
            }
        }

        mutating func receivedCloseNotify() -> CloseNotifyAction {
            switch self.state {
            case .active:
                self.state = .closed
                return .answerAndClose
            case .closing(let promise):
                self.state = .closed
                return .close(promise)
            case .idle, .handshaking, .closed:
                return .none
            }
        }

        /// The peer did not answer our close_notify in time. Returns the close promise to complete, if closing.
        mutating func shutdownTimedOut() -> (shouldClose: Bool, promise: EventLoopPromise<Void>?) {
            switch self.state {
            case .closing(let promise):
                self.state = .closed
                return (true, promise)
            case .idle, .handshaking, .active, .closed:
                return (false, nil)
            }
        }

        /// A fatal TLS error. Returns the pending close promise, if any.
        mutating func failed() -> EventLoopPromise<Void>? {
            defer { self.state = .closed }
            if case .closing(let promise) = self.state {
                return promise
            }
            return nil
        }

        mutating func channelInactive() -> InactiveAction {
            defer { self.state = .closed }
            switch self.state {
            case .idle, .closed:
                return .none
            case .handshaking:
                return .reportHandshakeEOF
            case .active:
                return .reportUncleanShutdown
            case .closing(let promise):
                return .succeedClose(promise)
            }
        }
    }
}
