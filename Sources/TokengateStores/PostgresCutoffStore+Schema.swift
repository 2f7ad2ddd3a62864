//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging

// MARK: Creating or checking tokengate's own tables, in either mode.

extension PostgresCutoffStore {
    /// Which of tokengate's own tables a mode needs.
    enum OwnTables: Sendable {
        /// Copy mode: `<table>_global` and `<table>`.
        case globalAndUsers
        /// RP-table mode: `<table>_global` only, for the global cutoff; the per-user cutoffs are the RP's table.
        case globalOnly
    }

    /// Creates tokengate's own tables if `<table>_global` does not exist, or checks its schema version if it does.
    ///
    /// One transaction under an advisory lock: PostgreSQL's DDL is transactional, so a crash leaves all or nothing,
    /// and two instances starting at once cannot both run `CREATE TABLE IF NOT EXISTS` (which races on the catalog
    /// and fails one of them with a unique violation). Both modes take the same lock and write the same
    /// `<table>_global`, so an RP-table instance and a copy-mode one never create it twice either.
    ///
    /// A role without the privilege to create or read the table fails with
    /// ``CutoffStoreError/Code/invalidStoreConfiguration`` naming the table and the `GRANT` that fixes it: retrying
    /// cannot help, and the store must not run without its global cutoff (the emergency switch would be gone).
    ///
    /// - Throws: ``CutoffStoreError/Code/unsupportedSchema`` for a newer schema;
    ///   ``CutoffStoreError/Code/invalidStoreFile`` without the global row; in copy mode,
    ///   ``CutoffStoreError/Code/invalidStoreConfiguration`` when `<table>_global` exists without `<table>` (made by
    ///   an RP-table instance, or `<table>` was dropped: an empty table would accept every revoked token).
    /// - Parameter creating: `false` for `check-config --connect`, which must change nothing: a missing table is
    ///   not created, and only whether the role may create it is checked.
    /// - Parameter needsUpgrade: set to whether an existing schema is of version 1 (``upgradeSchema(_:tables:in:logger:description:)``).
    /// - Returns: whether `<table>_global` existed.
    @discardableResult
    static func createOrCheckSchema(
        _ layout: CopyLayout,
        tables: OwnTables,
        in session: PostgresSession,
        logger: Logger,
        description: String,
        creating: Bool = true,
        needsUpgrade: UnsafeMutablePointer<Bool>? = nil
    ) throws -> Bool {
        try session.transaction {
            try session.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))", [.text("tokengate schema \(layout.global)")])
            let existing = try session.query(
                """
                SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL,
                       current_user::text, coalesce(current_schema()::text, 'public')
                """,
                [.text(layout.global.quoted), .text(layout.users.quoted)]
            )
            try existing.expectColumns(4)
            guard existing.count > 0 else {
                throw PostgresFailure(.unexpectedResult, "checking the schema returned no row")
            }
            let role = existing.text(0, 2) ?? "?"
            let refused = PrivilegeRefusal(
                table: layout.global, role: role, schema: layout.global.schema ?? existing.text(0, 3) ?? "public",
                tables: tables, description: description)
            if try existing.bool(0, 0) == true {
                let version = try refused.mapping(.reading) {
                    try Self.checkSchemaVersion(layout, in: session, description)
                }
                if tables == .globalAndUsers, try existing.bool(0, 1) != true {
                    throw CutoffStoreError(
                        code: .invalidStoreConfiguration,
                        message: "\(description): \(layout.global) exists but the cutoff table \(layout.users) does "
                            + "not (it was dropped, or \(layout.global) was created by tokengate in rp_table mode, "
                            + "which needs only the global table); refusing to start on an empty cutoff table. "
                            + "Restore \(layout.users), or choose another `table`"
                    )
                }
                // Not here: building the index of a large table takes longer than one operation may
                // (``upgradeSchema(_:tables:in:logger:description:)``, under the load timeout).
                needsUpgrade?.pointee = version < 2
                return true
            }
            guard creating else {
                let schema = refused.schema
                let mayCreate = try session.query(
                    "SELECT has_schema_privilege(current_user, $1, 'CREATE')", [.text(schema)])
                try mayCreate.expectColumns(1)
                guard mayCreate.count > 0, try mayCreate.bool(0, 0) == true else {
                    throw refused.error(.creating)
                }
                return false
            }
            try refused.mapping(.creating) {
                for statement in layout.schemaStatements(now: CutoffSyncService.systemNow(), tables: tables) {
                    try session.execute(statement)
                }
                try Self.migrateToVersion2(layout, tables: tables, in: session)
            }
            // Logged once the tables exist, not before trying: a refused attempt is retried (and its error is
            // logged by the caller), so a line per attempt would read as if the tables were made again and again.
            logger.info(
                "created the cutoff schema", metadata: ["store": "\(description)", "table": "\(layout.global)"])
            return false
        }
    }

    /// Brings a version 1 schema to version 2, in one transaction under the schema's advisory lock (the one
    /// ``createOrCheckSchema(_:tables:in:logger:description:creating:needsUpgrade:)`` takes), after reading the
    /// version again: another instance may have done it meanwhile. Nothing is dropped or rewritten; a failure
    /// leaves version 1, and the next call tries again.
    static func upgradeSchema(
        _ layout: CopyLayout,
        tables: OwnTables,
        in session: PostgresSession,
        logger: Logger,
        description: String
    ) throws {
        try session.transaction {
            try session.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))", [.text("tokengate schema \(layout.global)")])
            let rows = try session.query("SELECT schema_version FROM \(layout.global.quoted) WHERE id = 1")
            try rows.expectColumns(1)
            guard rows.count > 0, let version = try rows.int64(0, 0), version < 2 else {
                return
            }
            try PostgresPermissionDenied.mapping {
                try Self.migrateToVersion2(layout, tables: tables, in: session)
            } to: {
                PostgresPermissionDenied.error(
                    description,
                    refused: "the role may not alter \(layout.global) and \(layout.users) to schema version 2",
                    remedy: "run tokengate once as the tables' owner, or make its role their owner"
                )
            }
            logger.notice(
                "cutoff schema upgraded to version 2 (change feed)",
                metadata: ["store": "\(description)", "table": "\(layout.global)"])
        }
    }

    /// Version 1 (before the change feed) to version 2, inside the caller's transaction and advisory lock: only
    /// additions (``CopyLayout/version2Statements(tables:)``), so a crash or an error leaves version 1 as it was.
    /// Building the index of a large table can take longer than the pooled sessions' `statement_timeout`, which is
    /// lifted for this transaction only. Rows already there get sequence 0: every reader starts a feed with a full
    /// load, which has them.
    static func migrateToVersion2(_ layout: CopyLayout, tables: OwnTables, in session: PostgresSession) throws {
        try session.execute("SET LOCAL statement_timeout = 0")
        for statement in layout.version2Statements(tables: tables) {
            try session.execute(statement)
        }
        try session.execute("UPDATE \(layout.global.quoted) SET schema_version = 2 WHERE id = 1")
    }

    /// Refuses a schema version newer than this tokengate's, or a missing global row.
    /// - Returns: the version.
    private static func checkSchemaVersion(
        _ layout: CopyLayout,
        in session: PostgresSession,
        _ description: String
    ) throws -> Int64 {
        let rows = try session.query("SELECT schema_version FROM \(layout.global.quoted) WHERE id = 1")
        try rows.expectColumns(1)
        guard rows.count > 0, let version = try rows.int64(0, 0) else {
            throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
        }
        guard version <= Self.schemaVersion else {
            throw CutoffStoreError(
                code: .unsupportedSchema,
                message: "\(description): schema version \(version) is newer than this tokengate's "
                    + "\(Self.schemaVersion); upgrade tokengate"
            )
        }
        return version
    }

    /// Turns PostgreSQL's `insufficient_privilege` (SQLSTATE 42501) while creating or checking tokengate's own
    /// tables into an error an operator can act on (``PostgresPermissionDenied``): which table, which role, which
    /// `GRANT`.
    private struct PrivilegeRefusal {
        enum Step {
            case creating
            case reading
        }

        let table: PostgresIdentifier
        let role: String
        let schema: String
        let tables: OwnTables
        let description: String

        func mapping<T>(_ step: Step, _ body: () throws -> T) throws -> T {
            try PostgresPermissionDenied.mapping(body) { self.error(step) }
        }

        func error(_ step: Step) -> CutoffStoreError {
            let why: String
            switch self.tables {
            case .globalOnly:
                why = "in rp_table mode the users' cutoffs are read from the RP's table, but the global cutoff "
                    + "(revoke-all) is tokengate's own and is kept in \(self.table)"
            case .globalAndUsers:
                why = "tokengate keeps its cutoffs there"
            }
            switch step {
            case .creating:
                return PostgresPermissionDenied.error(
                    self.description,
                    refused: "the role \(self.role) may not create the table \(self.table)",
                    remedy: "\(why). Grant it once: GRANT CREATE ON SCHEMA \(self.schema) TO \(self.role) (tokengate "
                        + "then owns the table), or set `table` to a schema it may create tables in"
                )
            case .reading:
                return PostgresPermissionDenied.error(
                    self.description,
                    refused: "the role \(self.role) may not read or write the table \(self.table)",
                    remedy: "\(why). GRANT SELECT, UPDATE ON \(self.table) TO \(self.role)"
                )
            }
        }
    }
}
