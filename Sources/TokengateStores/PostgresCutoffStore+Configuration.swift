//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

extension PostgresCutoffStore {
    /// Where the database is and how the store uses it. Plain values: the configuration module fills them from
    /// `cutoffs: { postgres: ... }` (``init(url:password:)`` parses the URL form); the password comes from
    /// ``passwordFile``, which the store reads at every connection attempt.
    ///
    /// The description never contains the password, so logging a configuration is safe.
    public struct Configuration: Sendable, CustomStringConvertible, CustomReflectable {
        public var host: String
        public var port: Int
        public var user: String
        public var database: String
        /// A fixed password; `nil` for trust, peer or certificate authentication, or when ``passwordFile`` is
        /// set. Never logged, never part of an error message.
        public var password: String?
        /// The file holding the password (`cutoffs.password_file`), read at ``PostgresCutoffStore/init`` (an
        /// unreadable file is a configuration error) and again at every connection attempt, so a rotated password
        /// is used as soon as the file holds it, without a restart or reload. Set either this or ``password``.
        public var passwordFile: String?
        public var tls: TLSMode
        /// PEM file with the CA certificates that ``TLSMode/require`` trusts; `nil` for the system's trust store.
        public var tlsCAFile: String?
        /// tokengate's cutoff table (`name` or `schema.name`); the global cutoff, the schema version and the change
        /// counters live in `<table>_global`. In RP-table mode only `<table>_global` is created and used: the
        /// users' cutoffs come from the RP's table, the global cutoff stays tokengate's own.
        public var table: String
        /// The channel of `NOTIFY`/`LISTEN`; every instance sharing the database must use the same one.
        public var notifyChannel: String
        /// When set, the users' cutoffs are read from the RP's own users table instead of `table` (read-only); the
        /// global cutoff stays in `<table>_global`.
        public var rpTable: RPTable?
        /// Longest time one store call may take, waiting for a pooled connection and connecting included; after it
        /// the call fails with ``CutoffStoreError/Code/storeUnavailable`` so the sync service can report the store
        /// as lost instead of hanging. Also the pooled sessions' `statement_timeout`, so the server gives up too.
        public var operationTimeout: Duration
        /// Longest time to establish one connection (for a call, also within ``operationTimeout``).
        public var connectTimeout: Duration
        /// Longest time a full load of every cutoff may take (at start, every resync interval, after a forced
        /// write), and the schema's upgrade (which builds an index): ten million rows take seconds, not the
        /// ``operationTimeout`` of one statement. Each `FETCH` of the load is still one statement within
        /// ``operationTimeout``.
        public var loadTimeout: Duration
        /// The most pooled connections (the LISTEN connection comes on top), and the number of threads that run
        /// libpq calls.
        public var maxConnections: Int

        public init(
            host: String,
            port: Int = 5432,
            user: String,
            database: String,
            password: String? = nil,
            passwordFile: String? = nil,
            tls: TLSMode,
            tlsCAFile: String? = nil,
            table: String = "tokengate_cutoffs",
            notifyChannel: String = "tokengate_cutoffs",
            rpTable: RPTable? = nil,
            operationTimeout: Duration = .seconds(5),
            connectTimeout: Duration = .seconds(5),
            maxConnections: Int = 4,
            loadTimeout: Duration = .seconds(120)
        ) {
            self.host = host
            self.port = port
            self.user = user
            self.database = database
            self.password = password
            self.passwordFile = passwordFile
            self.tls = tls
            self.tlsCAFile = tlsCAFile
            self.table = table
            self.notifyChannel = notifyChannel
            self.rpTable = rpTable
            self.operationTimeout = operationTimeout
            self.connectTimeout = connectTimeout
            self.maxConnections = maxConnections
            self.loadTimeout = max(loadTimeout, operationTimeout)
        }

        /// Parses `postgres://USER@HOST[:PORT]/DATABASE[?sslmode=disable|prefer|require]` (`postgresql://` too;
        /// an IPv6 host in brackets). `sslmode` defaults to `prefer`, as with libpq.
        ///
        /// A password inside the URL is refused: configuration files get copied, logged and committed, so the
        /// password comes from its own file and is passed as `password`.
        public init(url: String, password: String? = nil) throws {
            func invalid(_ message: String) -> CutoffStoreError {
                // The URL is not repeated: it might contain a password after all.
                CutoffStoreError(code: .invalidStoreConfiguration, message: "the PostgreSQL URL \(message)")
            }
            guard url.utf8.count <= 2048, let components = URLComponents(string: url) else {
                throw invalid("is not a valid URL")
            }
            guard components.scheme == "postgres" || components.scheme == "postgresql" else {
                throw invalid("must start with postgres:// or postgresql://")
            }
            guard components.password == nil else {
                throw invalid("must not contain a password; put it in a password file")
            }
            guard let user = components.user, !user.isEmpty else {
                throw invalid("needs a user name (postgres://USER@HOST/DATABASE)")
            }
            guard var host = components.host, !host.isEmpty else {
                throw invalid("needs a host")
            }
            if host.hasPrefix("["), host.hasSuffix("]") {
                host = String(host.dropFirst().dropLast())
            }
            let path = components.path
            guard path.hasPrefix("/"), path.count > 1, !path.dropFirst().contains("/") else {
                throw invalid("needs a database name as its path (postgres://USER@HOST/DATABASE)")
            }
            var tls = TLSMode.prefer
            for item in components.queryItems ?? [] {
                switch item.name {
                case "sslmode":
                    guard let value = item.value, let mode = TLSMode(name: value) else {
                        throw invalid("has an sslmode other than disable, prefer or require")
                    }
                    tls = mode
                default:
                    throw invalid("has an unknown parameter (only sslmode is understood)")
                }
            }
            let port = components.port ?? 5432
            guard (1...65535).contains(port) else {
                throw invalid("has a port out of range")
            }
            self.init(
                host: host, port: port, user: user, database: String(path.dropFirst()), password: password, tls: tls)
        }

        public var description: String {
            var text = "postgres \(self.user)@\(self.host):\(self.port)/\(self.database) tls=\(self.tls)"
            if let rpTable = self.rpTable {
                text += " rp-table \(rpTable.table)"
            } else {
                text += " table \(self.table)"
            }
            return text
        }

        /// Mirrors show the description, so `dump(configuration)` cannot print the password either.
        public var customMirror: Mirror {
            Mirror(self, children: ["description": self.description])
        }
    }

    /// Whether and how the connections use TLS.
    public struct TLSMode: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case disable
            case prefer
            case require
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// Plain TCP. For loopback or a private network only.
        public static let disable = TLSMode(.disable)
        /// TLS when the server offers it, without checking its certificate (libpq's `prefer`): protects against
        /// passive eavesdropping only.
        public static let prefer = TLSMode(.prefer)
        /// TLS is required, and the server's certificate and host name are verified against the system's trust
        /// store or ``Configuration/tlsCAFile`` (libpq's `verify-full`; stricter than libpq's `require`).
        public static let require = TLSMode(.require)

        /// `disable`, `prefer` or `require`.
        public init?(name: String) {
            guard let base = Base(rawValue: name) else {
                return nil
            }
            self.init(base)
        }

        public var description: String {
            self.base.rawValue
        }

        var isDisabled: Bool {
            self.base == .disable
        }

        var isRequired: Bool {
            self.base == .require
        }
    }

    /// RP-table mode: the RP's own users table is the source of truth (the time of each user's last
    /// password change, kept by the website anyway), read and never written.
    ///
    /// `SELECT <userIDColumn>::text, <passwordChangedColumn>, <apiDisabledColumn> FROM <table>`: a user's
    /// `revoked_before` is the password-changed time, `api_revoked_before` the api-disabled time. Both columns hold
    /// a `timestamptz` or UNIX seconds (an integer or numeric type); fractions round up, so a token stamped in the
    /// same second as the change is rejected. `timestamp without time zone` is refused: read in the wrong zone it
    /// would accept tokens issued before the change. The global cutoff is not read from this table: it is
    /// tokengate's own, in ``Configuration/table``'s `<table>_global`, written by `revoke --all` and the admin API.
    public struct RPTable: Sendable, Hashable {
        /// `name` or `schema.name`.
        public var table: String
        public var userIDColumn: String
        public var passwordChangedColumn: String
        public var apiDisabledColumn: String?
        public var timeEncoding: TimeEncoding
        /// A `bigint` column of the RP's table that the RP's own trigger sets, on every insert and every change
        /// of a cutoff column, to the next value of tokengate's change counter (`<table>_global.change_seq`): the
        /// change feed of this mode (``PostgresCutoffStore/changes(since:limit:)``). `nil`: no feed, and every
        /// change reloads the RP's table whole. The SQL is in `docs/configuration.md`.
        public var changeColumn: String?

        public init(
            table: String,
            userIDColumn: String = "id",
            passwordChangedColumn: String = "password_changed_at",
            apiDisabledColumn: String? = nil,
            timeEncoding: TimeEncoding = .automatic,
            changeColumn: String? = nil
        ) {
            self.table = table
            self.userIDColumn = userIDColumn
            self.passwordChangedColumn = passwordChangedColumn
            self.apiDisabledColumn = apiDisabledColumn
            self.timeEncoding = timeEncoding
            self.changeColumn = changeColumn
        }
    }

    /// How the RP's time columns are stored.
    public struct TimeEncoding: Sendable, Hashable, CustomStringConvertible {
        private enum Base: String, Sendable, Hashable {
            case automatic
            case timestamp
            case unixSeconds = "unix-seconds"
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// Read each column's type from the catalog at the first connection.
        public static let automatic = TimeEncoding(.automatic)
        /// `timestamptz`.
        public static let timestamp = TimeEncoding(.timestamp)
        /// UNIX seconds in an integer or numeric column.
        public static let unixSeconds = TimeEncoding(.unixSeconds)

        /// `automatic`, `timestamp` or `unix-seconds`.
        public init?(name: String) {
            guard let base = Base(rawValue: name) else {
                return nil
            }
            self.init(base)
        }

        public var description: String {
            self.base.rawValue
        }
    }
}
