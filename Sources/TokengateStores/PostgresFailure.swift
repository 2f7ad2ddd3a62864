//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A failure inside the libpq layer, before it becomes a ``CutoffStoreError``.
///
/// It carries two texts on purpose. ``summary`` is ours (what failed, the SQLSTATE) and may reach a caller in a
/// ``CutoffStoreError``; ``detail`` is libpq's or the server's own text (`PQerrorMessage`, the error's primary
/// message), which names hosts, tables and roles and is therefore only logged, never returned (the admin API
/// would hand it to its client). Neither ever contains the password: libpq does not print it, and ours never
/// mention it.
struct PostgresFailure: Error, Sendable, CustomStringConvertible {
    struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case connect
            case connectionLost = "connection_lost"
            case server
            case timeout
            case interrupted
            case unexpectedResult = "unexpected_result"
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The connection could not be established (refused, DNS, TLS, authentication).
        static let connect = Kind(.connect)
        /// An established connection failed mid-call; it is discarded.
        static let connectionLost = Kind(.connectionLost)
        /// The server answered a statement with an error; the connection stays usable.
        static let server = Kind(.server)
        /// The call's deadline passed; the connection is discarded (a statement may still be in flight).
        static let timeout = Kind(.timeout)
        /// The store was closed or the caller cancelled; the connection is discarded.
        static let interrupted = Kind(.interrupted)
        /// A result libpq should not give for the statement sent (a `COPY`, a bad row shape, a wrong type).
        static let unexpectedResult = Kind(.unexpectedResult)

        var description: String {
            self.base.rawValue
        }
    }

    let kind: Kind
    /// Our own words, safe for callers.
    let summary: String
    /// libpq's or the server's text: for the log only.
    let detail: String?
    /// The SQLSTATE of a server error.
    let sqlState: String?

    init(_ kind: Kind, _ summary: String, detail: String? = nil, sqlState: String? = nil) {
        self.kind = kind
        self.summary = summary
        self.detail = detail?.trimmingTrailingWhitespace
        self.sqlState = sqlState
    }

    /// The summary only; see the type's comment for why ``detail`` is left out.
    var description: String {
        self.summary
    }
}

extension String {
    /// libpq's messages end in a newline.
    fileprivate var trimmingTrailingWhitespace: String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace {
            text = text.dropLast()
        }
        return String(text)
    }
}
