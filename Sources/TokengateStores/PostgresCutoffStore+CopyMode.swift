//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: tokengate's own tables (copy mode; the global table in RP-table mode too), their schema and the writes.

extension PostgresCutoffStore {
    /// The validated, quoted names of tokengate's own tables: `<table>` and `<table>_global` in copy mode; in
    /// RP-table mode only `<table>_global` is used, for the global cutoff (the per-user cutoffs are the RP's).
    struct CopyLayout: Sendable {
        let users: PostgresIdentifier
        let global: PostgresIdentifier
        let globalChanged: PostgresIdentifier
        let inserted: PostgresIdentifier
        let updated: PostgresIdentifier
        let deleted: PostgresIdentifier
        let truncated: PostgresIdentifier
        let numbered: PostgresIdentifier
        let byChange: PostgresIdentifier
        /// `<table>_devices`, in both modes (``PostgresCutoffStore/devicesTableStatements(_:)``).
        let devices: PostgresIdentifier
        let devicesByUser: PostgresIdentifier
        let devicesByChange: PostgresIdentifier

        init(table: String) throws {
            let users = try PostgresIdentifier(table, what: "the cutoff table")
            self.users = users
            self.global = try users.suffixed("_global", what: "the global table")
            self.globalChanged = try users.suffixed("_global_changed", what: "a trigger function")
            self.inserted = try users.suffixed("_inserted", what: "a trigger function")
            self.updated = try users.suffixed("_updated", what: "a trigger function")
            self.deleted = try users.suffixed("_deleted", what: "a trigger function")
            self.truncated = try users.suffixed("_truncated", what: "a trigger function")
            self.numbered = try users.suffixed("_numbered", what: "a trigger function")
            self.byChange = try users.suffixed("_by_change", what: "an index")
            self.devices = try users.suffixed("_devices", what: "the devices table")
            self.devicesByUser = try users.suffixed("_devices_by_user", what: "an index")
            self.devicesByChange = try users.suffixed("_devices_by_change", what: "an index")
        }

        var statements: Statements {
            let u = self.users.quoted
            let g = self.global.quoted
            return Statements(
                // One statement: one snapshot of both tables.
                load: """
                    \(self.globalLoadRow)
                    UNION ALL
                    SELECT 1::bigint, user_id, revoked_before, api_revoked_before, NULL::bigint FROM \(u)
                    """,
                // The global row, then the rows numbered after $1, oldest first, at most $2.
                changes: """
                    \(self.globalLoadRow)
                    UNION ALL
                    (SELECT 1::bigint, user_id, revoked_before, api_revoked_before, change_seq FROM \(u)
                     WHERE change_seq > $1 ORDER BY change_seq LIMIT $2)
                    """,
                marker: self.globalMarker,
                lookup: """
                    SELECT g.revoked_before, c.revoked_before, c.api_revoked_before
                    FROM \(g) AS g LEFT JOIN \(u) AS c ON c.user_id = $1
                    WHERE g.id = 1
                    """,
                lookupUserID: .text,
                lookupGlobalOnly: self.globalLookup,
                hasFeed: true,
                usersTable: u
            )
        }

        // MARK: The global row, read the same way in both modes (RP-table mode keeps its global cutoff here too).

        /// The global row as a row of ``Statements/load``: `(0, store_id, revoked_before, force_epoch, change_seq)`.
        var globalLoadRow: String {
            """
            SELECT 0::bigint, store_id, revoked_before, force_epoch, change_seq FROM \(self.global.quoted) WHERE id = 1
            """
        }

        /// `change_seq:force_epoch`, which every change of either table moves (the triggers); NULL without the
        /// global row.
        var globalMarker: String {
            "SELECT change_seq::text || ':' || force_epoch::text FROM \(self.global.quoted) WHERE id = 1"
        }

        /// A ``Statements/lookup`` row for a user id that cannot be in the users table: the global cutoff only.
        var globalLookup: String {
            "SELECT revoked_before, NULL::bigint, NULL::bigint FROM \(self.global.quoted) WHERE id = 1"
        }

        /// The schema, version 1: the global table with its trigger (``globalSchemaStatements(now:)``), then, for
        /// copy mode, the users table with its triggers. Trigger names are unqualified (a trigger belongs to its
        /// table); functions live in the table's schema. The bodies are dollar-quoted; the names in them cannot
        /// contain `$`.
        func schemaStatements(now: Int64, tables: OwnTables) -> [String] {
            switch tables {
            case .globalOnly:
                return self.globalSchemaStatements(now: now)
            case .globalAndUsers:
                return self.globalSchemaStatements(now: now) + self.usersSchemaStatements
            }
        }

        /// `<table>_global`, its one row, and the trigger that keeps its counters right when the global cutoff
        /// changes: all that RP-table mode creates.
        private func globalSchemaStatements(now: Int64) -> [String] {
            let g = self.global.quoted
            return [
                """
                CREATE TABLE IF NOT EXISTS \(g) (
                    id integer PRIMARY KEY CHECK (id = 1),
                    schema_version bigint NOT NULL,
                    revoked_before bigint,
                    force_epoch bigint NOT NULL DEFAULT 0,
                    change_seq bigint NOT NULL DEFAULT 0,
                    updated_at bigint NOT NULL
                )
                """,
                """
                INSERT INTO \(g) (id, schema_version, revoked_before, force_epoch, change_seq, updated_at)
                VALUES (1, \(PostgresCutoffStore.schemaVersion), NULL, 0, 0, \(now))
                ON CONFLICT (id) DO NOTHING
                """,
                """
                CREATE OR REPLACE FUNCTION \(self.globalChanged.quoted)() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    IF OLD.revoked_before IS NOT NULL
                       AND (NEW.revoked_before IS NULL OR NEW.revoked_before < OLD.revoked_before) THEN
                        NEW.force_epoch := NEW.force_epoch + 1;
                    END IF;
                    IF NEW.revoked_before IS DISTINCT FROM OLD.revoked_before THEN
                        NEW.change_seq := NEW.change_seq + 1;
                    END IF;
                    RETURN NEW;
                END
                $fn$
                """,
                "DROP TRIGGER IF EXISTS \(Self.triggerName(self.globalChanged)) ON \(g)",
                """
                CREATE TRIGGER \(Self.triggerName(self.globalChanged)) BEFORE UPDATE ON \(g)
                FOR EACH ROW EXECUTE FUNCTION \(self.globalChanged.quoted)()
                """,
            ]
        }

        /// `<table>` and the statement-level triggers that bump the global row's counters when it changes.
        private var usersSchemaStatements: [String] {
            let u = self.users.quoted
            let g = self.global.quoted
            let bumpChange = "UPDATE \(g) SET change_seq = change_seq + 1 WHERE id = 1;"
            let bumpBoth = "UPDATE \(g) SET change_seq = change_seq + 1, force_epoch = force_epoch + 1 WHERE id = 1;"
            let trigger = Self.triggerName
            return [
                """
                CREATE TABLE IF NOT EXISTS \(u) (
                    user_id text PRIMARY KEY,
                    revoked_before bigint,
                    api_revoked_before bigint,
                    updated_at bigint NOT NULL
                )
                """,
                """
                CREATE OR REPLACE FUNCTION \(self.inserted.quoted)() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    IF EXISTS (SELECT 1 FROM new_rows) THEN
                        \(bumpChange)
                    END IF;
                    RETURN NULL;
                END
                $fn$
                """,
                """
                CREATE OR REPLACE FUNCTION \(self.updated.quoted)() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    IF EXISTS (
                        SELECT 1 FROM old_rows AS o LEFT JOIN new_rows AS n ON n.user_id = o.user_id
                        WHERE n.user_id IS NULL
                           OR (o.revoked_before IS NOT NULL
                               AND (n.revoked_before IS NULL OR n.revoked_before < o.revoked_before))
                           OR (o.api_revoked_before IS NOT NULL
                               AND (n.api_revoked_before IS NULL OR n.api_revoked_before < o.api_revoked_before))
                    ) THEN
                        \(bumpBoth)
                    ELSIF EXISTS (SELECT 1 FROM new_rows) THEN
                        \(bumpChange)
                    END IF;
                    RETURN NULL;
                END
                $fn$
                """,
                """
                CREATE OR REPLACE FUNCTION \(self.deleted.quoted)() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    IF EXISTS (SELECT 1 FROM old_rows) THEN
                        \(bumpBoth)
                    END IF;
                    RETURN NULL;
                END
                $fn$
                """,
                """
                CREATE OR REPLACE FUNCTION \(self.truncated.quoted)() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    \(bumpBoth)
                    RETURN NULL;
                END
                $fn$
                """,
                "DROP TRIGGER IF EXISTS \(trigger(self.inserted)) ON \(u)",
                """
                CREATE TRIGGER \(trigger(self.inserted)) AFTER INSERT ON \(u)
                REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION \(self.inserted.quoted)()
                """,
                "DROP TRIGGER IF EXISTS \(trigger(self.updated)) ON \(u)",
                """
                CREATE TRIGGER \(trigger(self.updated)) AFTER UPDATE ON \(u)
                REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
                FOR EACH STATEMENT EXECUTE FUNCTION \(self.updated.quoted)()
                """,
                "DROP TRIGGER IF EXISTS \(trigger(self.deleted)) ON \(u)",
                """
                CREATE TRIGGER \(trigger(self.deleted)) AFTER DELETE ON \(u)
                REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION \(self.deleted.quoted)()
                """,
                "DROP TRIGGER IF EXISTS \(trigger(self.truncated)) ON \(u)",
                """
                CREATE TRIGGER \(trigger(self.truncated)) AFTER TRUNCATE ON \(u)
                FOR EACH STATEMENT EXECUTE FUNCTION \(self.truncated.quoted)()
                """,
            ]
        }

        /// Version 2's additions (the change feed, ``PostgresCutoffStore/changes(since:limit:)``), run after
        /// version 1's tables exist, by a new store and by the upgrade of an old one alike; each can run again.
        ///
        /// - `<table>_global.store_id`: a random id, the feed's name (``CutoffFeedPosition/feed``).
        /// - Copy mode: `<table>.change_seq` with its index, and a `BEFORE INSERT OR UPDATE` row trigger that takes
        ///   the next value of the global row's `change_seq` for it. The `UPDATE` of the global row locks it until
        ///   the writing transaction ends, so writers take their numbers one after the other, in the order they
        ///   commit: a reader that sees the counter at N sees every row numbered up to N (a plain `SEQUENCE` would
        ///   not promise that: a smaller number can commit after a larger one, and a reader past it would miss it).
        ///   Writes were already serialised on that row by the statement triggers; an operator's transaction that
        ///   changes many rows in an order that crosses another's can now deadlock, which PostgreSQL detects and
        ///   undoes (one of them fails; nothing is half written).
        func version2Statements(tables: OwnTables) -> [String] {
            let g = self.global.quoted
            let global = [
                "ALTER TABLE \(g) ADD COLUMN IF NOT EXISTS store_id text",
                "UPDATE \(g) SET store_id = md5(random()::text || clock_timestamp()::text) WHERE id = 1 AND store_id IS NULL",
            ]
            guard tables == .globalAndUsers else {
                return global
            }
            let u = self.users.quoted
            let trigger = Self.triggerName
            return global + [
                "ALTER TABLE \(u) ADD COLUMN IF NOT EXISTS change_seq bigint NOT NULL DEFAULT 0",
                "CREATE INDEX IF NOT EXISTS \(trigger(self.byChange)) ON \(u) (change_seq)",
                """
                CREATE OR REPLACE FUNCTION \(self.numbered.quoted)() RETURNS trigger LANGUAGE plpgsql AS $fn$
                BEGIN
                    UPDATE \(g) SET change_seq = change_seq + 1 WHERE id = 1 RETURNING change_seq INTO NEW.change_seq;
                    RETURN NEW;
                END
                $fn$
                """,
                "DROP TRIGGER IF EXISTS \(trigger(self.numbered)) ON \(u)",
                """
                CREATE TRIGGER \(trigger(self.numbered))
                BEFORE INSERT OR UPDATE OF user_id, revoked_before, api_revoked_before ON \(u)
                FOR EACH ROW EXECUTE FUNCTION \(self.numbered.quoted)()
                """,
            ]
        }

        /// A trigger's name: unqualified, as a trigger belongs to its table.
        private static func triggerName(_ function: PostgresIdentifier) -> String {
            "\"\(function.name)\""
        }
    }

    /// The forward-only write, inside the caller's transaction. As in the SQLite store, forward-only is decided
    /// inside one statement (`ON CONFLICT ... DO UPDATE ... WHERE`, which locks and re-checks the latest committed
    /// row), so two writers can never both read an old value; `RETURNING` yields a row only if a row changed.
    static func write(
        _ write: CutoffWrite,
        layout: CopyLayout,
        now: Int64,
        in session: PostgresSession
    ) throws -> CutoffWriteResult {
        let u = layout.users.quoted
        let g = layout.global.quoted
        let key: PostgresValue
        let changedSQL: String
        let currentSQL: String
        let what: String
        switch write {
        case .passwordChanged(let user, _, _), .disableMobileApps(let user, _, _):
            // The column name comes from this switch only, never from input.
            let c: String
            if case .passwordChanged = write {
                c = "revoked_before"
            } else {
                c = "api_revoked_before"
            }
            // A forced write still changes only a different value: the stored value written again is `changed: false`.
            let guardClause = write.force
                ? " WHERE cur.\(c) IS DISTINCT FROM excluded.\(c)"
                : " WHERE cur.\(c) IS NULL OR cur.\(c) < excluded.\(c)"
            changedSQL = """
                INSERT INTO \(u) AS cur (user_id, \(c), updated_at) VALUES ($1, $2, $3)
                ON CONFLICT (user_id) DO UPDATE SET \(c) = excluded.\(c), updated_at = excluded.updated_at\(guardClause)
                RETURNING \(c)
                """
            currentSQL = "SELECT \(c) FROM \(u) WHERE user_id = $1"
            what = "the user's \(c)"
            key = .text(user)
        case .revokeAll:
            let guardClause = write.force
                ? " AND revoked_before IS DISTINCT FROM $2"
                : " AND (revoked_before IS NULL OR revoked_before < $2)"
            changedSQL = """
                UPDATE \(g) SET revoked_before = $2, updated_at = $3 WHERE id = $1\(guardClause)
                RETURNING revoked_before
                """
            currentSQL = "SELECT revoked_before FROM \(g) WHERE id = $1"
            what = "the global cutoff"
            key = .int8(1)
        }

        let changed = try session.query(changedSQL, [key, .int8(write.at), .int8(now)])
        if changed.count > 0 {
            return CutoffWriteResult(cutoff: write.at, changed: true, forced: write.force)
        }
        let current = try session.query(currentSQL, [key])
        try current.expectColumns(1)
        let kept = current.count > 0 ? try current.int64(current.count - 1, 0) : nil
        if case .revokeAll = write, current.count == 0 {
            throw CutoffStoreError(code: .invalidStoreFile, message: "the global row of \(layout.global) is missing")
        }
        return try CutoffWriteResult.unchanged(kept: kept, requested: write.at, what: what)
    }
}
