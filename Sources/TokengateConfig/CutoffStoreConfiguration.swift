//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The cutoff store: exactly one of a JSON file, a SQLite database (the embedded default) or PostgreSQL.
public enum CutoffStoreConfiguration: Sendable, Equatable {
    case file(ConfigPath)
    case sqlite(ConfigPath)
    case postgres(PostgresStoreConfiguration)
}

/// A PostgreSQL cutoff store shared by several gateway instances (DESIGN §7).
///
/// The URL never carries a password (that is refused at load, because the configuration file is not a secret
/// store and URLs end up in logs and process listings): the password comes from ``passwordFile``.
public struct PostgresStoreConfiguration: Sendable, Equatable {
    /// The URL as written (password-free), for messages.
    public var url: String
    public var host: String
    public var port: Int
    public var user: String
    public var database: String
    public var tlsMode: PostgresTLSMode
    public var passwordFile: ConfigPath?
    /// tokengate's own cutoff table. Default `tokengate_cutoffs`. A plain or schema-qualified SQL identifier. With
    /// ``rpTable`` only `<table>_global` (the global cutoff) is used.
    public var table: String
    /// The LISTEN/NOTIFY channel that pushes changes to every instance. Default `tokengate_cutoffs`.
    public var notifyChannel: String
    /// Full resync period, the safety net under LISTEN/NOTIFY. Default 60s.
    public var resyncInterval: Duration
    /// After this long without a successful sync, the instance reports not-ready (it keeps enforcing the last
    /// snapshot). Default 5m.
    public var staleAfter: Duration
    /// Optional snapshot cache that lets an instance start while the database is unreachable.
    public var cacheFile: ConfigPath?
    /// Read password-changed (and optionally api-disabled) times from the RP's own users table.
    public var rpTable: RPTableConfiguration?

    public init(
        url: String,
        host: String,
        port: Int = 5432,
        user: String,
        database: String,
        tlsMode: PostgresTLSMode = .disable,
        passwordFile: ConfigPath? = nil,
        table: String = "tokengate_cutoffs",
        notifyChannel: String = "tokengate_cutoffs",
        resyncInterval: Duration = .seconds(60),
        staleAfter: Duration = .seconds(300),
        cacheFile: ConfigPath? = nil,
        rpTable: RPTableConfiguration? = nil
    ) {
        self.url = url
        self.host = host
        self.port = port
        self.user = user
        self.database = database
        self.tlsMode = tlsMode
        self.passwordFile = passwordFile
        self.table = table
        self.notifyChannel = notifyChannel
        self.resyncInterval = resyncInterval
        self.staleAfter = staleAfter
        self.cacheFile = cacheFile
        self.rpTable = rpTable
    }
}

/// The RP's own users table, read instead of a copy (its time of each user's last password change).
/// Every name is validated as an SQL identifier at load, so the store can quote it safely.
public struct RPTableConfiguration: Sendable, Equatable {
    public var table: String
    public var userColumn: String
    public var passwordChangedColumn: String
    public var apiDisabledColumn: String?
    /// `change_column`: the opt-in change feed, a `bigint` column that the RP's trigger numbers from tokengate's
    /// counter (docs/configuration.md); without it every change reloads the RP's table whole.
    public var changeColumn: String?

    public init(
        table: String,
        userColumn: String,
        passwordChangedColumn: String,
        apiDisabledColumn: String? = nil,
        changeColumn: String? = nil
    ) {
        self.table = table
        self.userColumn = userColumn
        self.passwordChangedColumn = passwordChangedColumn
        self.apiDisabledColumn = apiDisabledColumn
        self.changeColumn = changeColumn
    }
}

/// `sslmode` of the PostgreSQL URL. Default: `disable` on a loopback host, `require` otherwise.
public enum PostgresTLSMode: String, Sendable, Equatable, CaseIterable {
    case disable
    case require
    case verifyFull = "verify-full"
}
