//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: RP-table mode: reading the RP's own users table (and tokengate's own global cutoff).

/// ### The global cutoff
/// The RP's table has no place for the emergency switch, so tokengate keeps it in its own `<table>_global`
/// (``PostgresCutoffStore/Configuration/table``, `tokengate_cutoffs_global` by default), created at the first start
/// as in copy mode and written the same way (forward-only unless forced, `NOTIFY '*'` at commit). The role needs
/// `CREATE` on that table's schema once (or the table made by a role that has it); without it the store refuses to
/// work, naming the table and the `GRANT` (see
/// ``PostgresCutoffStore/createOrCheckSchema(_:tables:in:logger:description:)``).
///
/// ### Noticing changes
/// The sync service polls ``PostgresCutoffStore/changeMarker()`` every `pollInterval` (default 1 s); in this mode
/// the marker is the global row's counters, `count(*)` and the sums of both time columns, one scan of the table,
/// which changes whenever a row is added or removed, a time changes, or the global cutoff does. For large tables
/// raise the poll interval and install this trigger, which makes changes arrive at once (replace the names by the
/// configured ones; the channel is
/// ``PostgresCutoffStore/Configuration/notifyChannel``):
///
/// ```sql
/// CREATE OR REPLACE FUNCTION tokengate_notify_users() RETURNS trigger LANGUAGE plpgsql AS $$
/// BEGIN
///     PERFORM pg_notify('tokengate_cutoffs', '*');
///     RETURN NULL;
/// END $$;
/// CREATE TRIGGER tokengate_notify_users
///     AFTER INSERT OR DELETE OR TRUNCATE OR UPDATE OF password_changed_at, api_disabled_at ON users
///     FOR EACH STATEMENT EXECUTE FUNCTION tokengate_notify_users();
/// ```
///
/// With ``RPTable/changeColumn`` (opt-in) the RP's own trigger numbers every changed row from `<table>_global`'s
/// `change_seq`, and the sync service reads only the rows numbered after the last one it saw
/// (``PostgresCutoffStore/changes(since:limit:)``) instead of the marker and a whole read; docs/configuration.md
/// gives the SQL.
///
/// A time that moves back in the RP's table (a restored backup) is not taken while the gateway runs: reloads only
/// move cutoffs forward, so the earlier time takes effect at the next restart. Users deleted from the table keep
/// their cutoffs until then too. A forced move back of the global cutoff is taken at once (it bumps the force
/// epoch), and with it the RP's table as it is then.
extension PostgresCutoffStore {
    /// The validated names of RP-table mode.
    struct RPLayout: Sendable {
        let table: PostgresIdentifier
        let userID: PostgresIdentifier
        let passwordChanged: PostgresIdentifier
        let apiDisabled: PostgresIdentifier?
        /// The opt-in change feed's column (``RPTable/changeColumn``).
        let change: PostgresIdentifier?
        let encoding: TimeEncoding
        /// tokengate's own tables as in copy mode (``Configuration/table``), of which only `<table>_global` is
        /// created and used: the global cutoff is not the RP's to keep.
        let own: CopyLayout

        init(_ rp: RPTable, ownTable: String) throws {
            self.own = try CopyLayout(table: ownTable)
            self.table = try PostgresIdentifier(rp.table, what: "the RP table")
            self.userID = try PostgresIdentifier(rp.userIDColumn, what: "the user-id column", allowSchema: false)
            self.passwordChanged = try PostgresIdentifier(
                rp.passwordChangedColumn,
                what: "the password-changed column",
                allowSchema: false
            )
            self.apiDisabled = try rp.apiDisabledColumn.map {
                try PostgresIdentifier($0, what: "the api-disabled column", allowSchema: false)
            }
            self.change = try rp.changeColumn.map {
                try PostgresIdentifier($0, what: "the change column", allowSchema: false)
            }
            self.encoding = rp.timeEncoding
        }

        var readOnlyMessage: String {
            var columns = "\(self.passwordChanged)"
            if let apiDisabled = self.apiDisabled {
                columns += " or \(apiDisabled)"
            }
            return "cutoffs are read from the RP's own table \(self.table); set \(columns) there "
                + "(e.g. UPDATE \(self.table) SET \(self.passwordChanged) = now() WHERE \(self.userID) = ...); "
                + "the gateway picks the change up by itself"
        }

        /// Reads the columns' types from the catalog and builds the statements, which read the RP's table for the
        /// users' cutoffs and tokengate's `<table>_global` for the global cutoff and the force epoch.
        func resolve(in session: PostgresSession, description: String) throws -> Statements {
            let rows = try session.query(
                """
                SELECT a.attname::text, t.typname::text
                FROM pg_catalog.pg_attribute AS a JOIN pg_catalog.pg_type AS t ON t.oid = a.atttypid
                WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
                """,
                [.text(self.table.quoted)]
            )
            try rows.expectColumns(2)
            var types: [String: String] = [:]
            for row in 0..<rows.count {
                if let column = rows.text(row, 0), let type = rows.text(row, 1) {
                    types[column] = type
                }
            }
            guard !types.isEmpty else {
                throw CutoffStoreError(
                    code: .invalidStoreConfiguration,
                    message: "\(description): the RP table \(self.table) does not exist (names are case-sensitive)"
                )
            }
            func type(of column: PostgresIdentifier) throws -> String {
                guard let type = types[column.name] else {
                    throw CutoffStoreError(
                        code: .invalidStoreConfiguration,
                        message: "\(description): the RP table \(self.table) has no column \(column)"
                    )
                }
                return type
            }

            let t = self.table.quoted
            let u = self.userID.quoted
            let p = try self.secondsExpression(
                self.passwordChanged, type: try type(of: self.passwordChanged), description)
            let a =
                try self.apiDisabled.map { try self.secondsExpression($0, type: try type(of: $0), description) }
                ?? "NULL::bigint"
            let lookupUserID: UserIDBinding
            let userCondition: String
            switch try type(of: self.userID) {
            case "int2", "int4", "int8":
                // Compared as an integer, so the RP's primary-key index is used.
                lookupUserID = .integer
                userCondition = "\(u) = $1"
            case "text", "varchar":
                lookupUserID = .text
                userCondition = "\(u) = $1"
            default:
                lookupUserID = .text
                userCondition = "\(u)::text = $1"
            }
            let notNull =
                self.apiDisabled.map { "\(self.passwordChanged.quoted) IS NOT NULL OR \($0.quoted) IS NOT NULL" }
                ?? "\(self.passwordChanged.quoted) IS NOT NULL"
            let g = self.own.global.quoted
            var changes: String?
            if let change = self.change {
                // bigint only: the numbers come from `<table>_global.change_seq`, and a narrower or fractional
                // column would wrap or round them, and the feed would skip changes.
                guard try type(of: change) == "int8" else {
                    throw CutoffStoreError(
                        code: .invalidStoreConfiguration,
                        message: "\(description): the change column \(change) of \(self.table) must be a bigint "
                            + "(it holds numbers of \(self.own.global).change_seq), not \(try type(of: change))"
                    )
                }
                let c = change.quoted
                // The global row, then the rows numbered after $1, oldest first, at most $2: as in copy mode.
                changes = """
                    \(self.own.globalLoadRow)
                    UNION ALL
                    (SELECT 1::bigint, \(u)::text, \(p), \(a), \(c) FROM \(t)
                     WHERE \(c) > $1 AND (\(notNull)) ORDER BY \(c) LIMIT $2)
                    """
            }
            return Statements(
                // One statement: one snapshot of both tables.
                load: """
                    \(self.own.globalLoadRow)
                    UNION ALL
                    SELECT 1::bigint, \(u)::text, \(p), \(a), NULL::bigint FROM \(t) WHERE \(notNull)
                    """,
                changes: changes,
                // NULL without the global row, so the sync service reloads and reports it missing.
                marker: """
                    SELECT (\(self.own.globalMarker))
                        || ':' || count(*)::text
                        || ':' || coalesce(sum(\(p))::text, '-')
                        || ':' || coalesce(sum(\(a))::text, '-')
                    FROM \(t)
                    """,
                // The aggregate always yields one row; the join with the global row yields none without it.
                lookup: """
                    SELECT g.revoked_before, r.revoked_before, r.api_revoked_before
                    FROM \(g) AS g CROSS JOIN (
                        SELECT max(\(p)) AS revoked_before, max(\(a)) AS api_revoked_before
                        FROM \(t) WHERE \(userCondition)
                    ) AS r
                    WHERE g.id = 1
                    """,
                lookupUserID: lookupUserID,
                lookupGlobalOnly: self.own.globalLookup,
                hasFeed: changes != nil,
                usersTable: t
            )
        }

        /// An SQL expression for a time column as bigint UNIX seconds, fractions rounded up (fail closed).
        private func secondsExpression(_ column: PostgresIdentifier, type: String, _ description: String) throws
            -> String
        {
            let c = column.quoted
            let timestamp = """
                CASE WHEN isfinite(\(c)) THEN ceil(extract(epoch FROM \(c)))::bigint \
                WHEN \(c) > 'epoch'::timestamptz THEN 9223372036854775807 END
                """
            let integer = "\(c)::bigint"
            let fractional = "ceil(\(c))::bigint"
            switch (type, self.encoding) {
            case ("timestamptz", .automatic), ("timestamptz", .timestamp):
                return timestamp
            case ("int2", .automatic), ("int4", .automatic), ("int8", .automatic),
                ("int2", .unixSeconds), ("int4", .unixSeconds), ("int8", .unixSeconds):
                return integer
            case ("numeric", .automatic), ("float4", .automatic), ("float8", .automatic),
                ("numeric", .unixSeconds), ("float4", .unixSeconds), ("float8", .unixSeconds):
                return fractional
            case ("timestamp", _):
                throw CutoffStoreError(
                    code: .invalidStoreConfiguration,
                    message: "\(description): the column \(column) is a timestamp without time zone; read in the "
                        + "wrong zone it would accept tokens issued before a password change. Use timestamptz "
                        + "(ALTER TABLE ... ALTER COLUMN ... TYPE timestamptz USING ... AT TIME ZONE 'UTC')"
                )
            default:
                throw CutoffStoreError(
                    code: .invalidStoreConfiguration,
                    message: "\(description): the column \(column) has type \(type), which cannot be read as "
                        + "\(self.encoding == .automatic ? "a time" : "\(self.encoding)") "
                        + "(timestamptz, or UNIX seconds in an integer or numeric column)"
                )
            }
        }
    }
}
