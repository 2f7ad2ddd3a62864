//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: `tokengate check-config --connect`: what the server says, changing nothing.

extension PostgresCutoffStore {
    /// What ``probe()`` learnt from the server.
    public struct ProbeReport: Sendable, Equatable {
        /// tokengate's own tables do not exist yet; the role may create them, and the first `serve` will.
        public var createsTables: Bool
        /// Writes the role may not make. `serve` starts without them; `revoke` and the admin API's writes fail.
        public var missingWritePrivileges: [String]
    }

    /// Connects once and checks what `serve` needs from the server, without creating or writing anything: the
    /// connection itself (host, TLS, password), the RP table and its columns (RP-table mode), tokengate's own tables
    /// and their schema version, or, where they do not exist yet, the role's `CREATE` on their schema, and that
    /// the role may run the reads `serve` runs. Where it may not write, the report says so.
    ///
    /// Needs ``run(listening:)`` running, like every other call. Bounded by the store's `operation_timeout`.
    ///
    /// - Throws: ``CutoffStoreError``, as `serve` would fail its first sync: `invalidStoreConfiguration` for a
    ///   privilege or a name to fix, `storeUnavailable` for a server that cannot be reached or refuses the login,
    ///   `unsupportedSchema` and `invalidStoreFile` as ``load()`` throws them.
    public func probe() async throws -> ProbeReport {
        let source = self.source
        let description = self.storeDescription
        let logger = self.logger
        return try await self.withConnection { session in
            let statements: Statements
            let readTables: [PostgresIdentifier]
            let ownTables: [(PostgresIdentifier, String)]
            switch source {
            case .copy(let layout):
                let existed = try Self.createOrCheckSchema(
                    layout, tables: .globalAndUsers, in: session, logger: logger, description: description,
                    creating: false)
                guard existed else { return ProbeReport(createsTables: true, missingWritePrivileges: []) }
                statements = layout.statements
                readTables = [layout.global, layout.users]
                ownTables = [(layout.global, "UPDATE"), (layout.users, "INSERT"), (layout.users, "UPDATE")]
            case .rpTable(let layout):
                statements = try layout.resolve(in: session, description: description)
                // The RP's table first, as `serve` reads it: by its columns (a role may have SELECT on those only;
                // the catalog read above checked no privilege). Its own global table may not exist yet.
                try Self.probeRPColumns(layout, in: session, description: description)
                let existed = try Self.createOrCheckSchema(
                    layout.own, tables: .globalOnly, in: session, logger: logger, description: description,
                    creating: false)
                guard existed else { return ProbeReport(createsTables: true, missingWritePrivileges: []) }
                readTables = [layout.own.global]
                ownTables = [(layout.own.global, "UPDATE")]
            }
            try Self.requireSelect(on: readTables, in: session, description: description)
            let role = try Self.currentRole(in: session)
            // The reads themselves, as the sync service makes them: what a privilege check cannot see (a column
            // the role may not read, a policy) fails here as it would at the first sync.
            try Self.probeRead(statements.marker, tables: readTables, in: session, description: description)
            let someone: PostgresValue
            switch statements.lookupUserID {
            case .text: someone = .text("")
            case .integer: someone = .int8(0)
            }
            try Self.probeRead(statements.lookup, [someone], tables: readTables, in: session, description: description)
            let missing = try ownTables.filter { try !Self.has($0.1, on: $0.0, in: session) }.map {
                "GRANT \($0.1) ON \($0.0) TO \(role)"
            }
            return ProbeReport(createsTables: false, missingWritePrivileges: missing)
        }
    }

    /// Refuses, naming the `GRANT`, when the role may not read one of `tables`.
    private static func requireSelect(
        on tables: [PostgresIdentifier],
        in session: PostgresSession,
        description: String
    ) throws {
        let unreadable = try tables.filter { try !Self.has("SELECT", on: $0, in: session) }
        guard !unreadable.isEmpty else { return }
        let role = try Self.currentRole(in: session)
        let names = unreadable.map(\.description).joined(separator: ", ")
        throw CutoffStoreError(
            code: .invalidStoreConfiguration,
            message: "\(description): the role \(role) may not read \(names), which the gateway reads; "
                + "GRANT SELECT ON \(names) TO \(role)"
        )
    }

    /// The RP table's columns the gateway reads, read as it reads them: by the role's privilege on the table or on
    /// those columns, whichever it has.
    private static func probeRPColumns(_ layout: RPLayout, in session: PostgresSession, description: String) throws {
        let columns = [layout.userID, layout.passwordChanged] + (layout.apiDisabled.map { [$0] } ?? [])
        try Self.probeRead(
            "SELECT \(columns.map(\.quoted).joined(separator: ", ")) FROM \(layout.table.quoted) WHERE false",
            tables: [layout.table], in: session, description: description)
    }

    /// Runs one read as the sync service would; a refusal a privilege check cannot see (a column privilege, a row
    /// security policy: SQLSTATE 42501) is a configuration to fix, said as such (``PostgresPermissionDenied``).
    private static func probeRead(
        _ sql: String,
        _ parameters: [PostgresValue] = [],
        tables: [PostgresIdentifier],
        in session: PostgresSession,
        description: String
    ) throws {
        try PostgresPermissionDenied.mapping {
            _ = try session.query(sql, parameters)
        } to: {
            let role = try Self.currentRole(in: session)
            let names = tables.map(\.description).joined(separator: ", ")
            return PostgresPermissionDenied.error(
                description,
                refused: "the role \(role) may not read what the gateway reads in \(names)",
                remedy: "GRANT SELECT ON \(names) TO \(role) (or on the columns it reads)"
            )
        }
    }

    private static func currentRole(in session: PostgresSession) throws -> String {
        let rows = try session.query("SELECT current_user::text")
        try rows.expectColumns(1)
        return rows.count > 0 ? rows.text(0, 0) ?? "?" : "?"
    }

    private static func has(
        _ privilege: String,
        on table: PostgresIdentifier,
        in session: PostgresSession
    ) throws -> Bool {
        let rows = try session.query(
            "SELECT has_table_privilege(current_user, $1, $2)", [.text(table.quoted), .text(privilege)])
        try rows.expectColumns(1)
        guard rows.count > 0 else { return false }
        return try rows.bool(0, 0) == true
    }
}
