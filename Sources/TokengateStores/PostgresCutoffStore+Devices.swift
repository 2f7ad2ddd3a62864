//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers
import TokengateTokens

// MARK: Devices: `<table>_devices`, tokengate's own table in either mode.

extension PostgresCutoffStore {
    /// Whether `<table>_devices` exists (made by ``ensureDevicesTable(_:in:logger:description:)`` at the first call
    /// that reached the database). Until then, and when the role may not create it, the store keeps no devices and
    /// the token page mints tokens without one, as before devices existed.
    public nonisolated var keepsDevices: Bool { self.devicesReady.withLockedValue { $0 } }

    /// The devices table's layout: the copy layout of tokengate's own tables in either mode.
    nonisolated var deviceLayout: CopyLayout {
        switch self.source {
        case .copy(let layout): layout
        case .rpTable(let rp): rp.own
        }
    }

    /// Creates `<table>_devices` if it is missing, under the schema's advisory lock.
    ///
    /// Not a schema version: the table only adds, and instances of an earlier tokengate keep working on the same
    /// database (they ignore it), so a fleet upgrades one instance at a time. Until every instance runs a
    /// tokengate that knows devices, a device revocation is enforced by the upgraded ones only.
    ///
    /// A role that may not create it is not an outage: the cutoffs work as before, without devices, and a warning
    /// says which statement to run (or which privilege to grant). Neither is a role that may read it but not write
    /// it (a gateway given a read-only role on purpose): it enforces the revoked devices it reads, and mints
    /// tokens without a device, since it could not record one.
    /// - Returns: whether the role may read the table (enforce revocations) and write it (record devices).
    static func ensureDevicesTable(
        _ layout: CopyLayout, in session: PostgresSession, logger: Logger, description: String
    ) throws -> (readable: Bool, writable: Bool) {
        let exists = try session.query("SELECT to_regclass($1) IS NOT NULL", [.text(layout.devices.quoted)])
        try exists.expectColumns(1)
        if exists.count > 0, try exists.bool(0, 0) == true {
            let privileges = try session.query(
                "SELECT has_table_privilege($1, 'SELECT'), has_table_privilege($1, 'INSERT') "
                    + "AND has_table_privilege($1, 'UPDATE') AND has_table_privilege($2, 'UPDATE')",
                [.text(layout.devices.quoted), .text(layout.global.quoted)])
            try privileges.expectColumns(2)
            let canRead = privileges.count > 0 ? try privileges.bool(0, 0) : nil
            let canWrite = privileges.count > 0 ? try privileges.bool(0, 1) : nil
            let readable = canRead == true
            let writable = readable && canWrite == true
            if !writable {
                logger.warning(
                    "the database role may not \(readable ? "write" : "read") the devices table; tokens are minted without a device",
                    metadata: [
                        "store": "\(description)", "table": "\(layout.devices)",
                        "grant": "GRANT SELECT, INSERT, UPDATE ON \(layout.devices) (and UPDATE ON \(layout.global))",
                    ])
            }
            return (readable, writable)
        }
        do {
            try session.transaction {
                try session.execute(
                    "SELECT pg_advisory_xact_lock(hashtext($1))", [.text("tokengate schema \(layout.global)")])
                for statement in Self.devicesTableStatements(layout) {
                    try session.execute(statement)
                }
            }
        } catch let failure as PostgresFailure where failure.sqlState == PostgresPermissionDenied.sqlState {
            logger.warning(
                "the database role may not create the devices table; tokens are minted without a device until it exists",
                metadata: [
                    "store": "\(description)", "table": "\(layout.devices)",
                    "create": .string(Self.devicesTableStatements(layout).joined(separator: "; ")),
                ]
            )
            return (false, false)
        }
        logger.info("created the devices table", metadata: ["store": "\(description)", "table": "\(layout.devices)"])
        return (true, true)
    }

    /// The table and its indexes: by user for the listing, by `change_seq` (a number of `<table>_global.change_seq`,
    /// taken when a device is revoked) for the change feed.
    static func devicesTableStatements(_ layout: CopyLayout) -> [String] {
        let d = layout.devices.quoted
        return [
            """
            CREATE TABLE IF NOT EXISTS \(d) (
                device_id text PRIMARY KEY,
                user_id text NOT NULL,
                app text NOT NULL,
                created_at bigint NOT NULL,
                last_used_at bigint,
                tokens_expire_by bigint,
                revoked_at bigint,
                change_seq bigint NOT NULL DEFAULT 0,
                refresh_generation bigint,
                refresh_expires_at bigint
            )
            """,
            "CREATE INDEX IF NOT EXISTS \"\(layout.devicesByUser.name)\" ON \(d) (user_id)",
            "CREATE INDEX IF NOT EXISTS \"\(layout.devicesByChange.name)\" ON \(d) (change_seq)",
        ]
    }

    /// The revoked devices, as the full load reads them (inside its transaction, so from the same snapshot).
    static func revokedDevicesQuery(_ layout: CopyLayout) -> String {
        "SELECT device_id, user_id, revoked_at, tokens_expire_by, change_seq FROM \(layout.devices.quoted) "
            + "WHERE revoked_at IS NOT NULL"
    }

    /// The devices revoked after `$1`, oldest first, at most `$2`.
    static func revokedDevicesChangesQuery(_ layout: CopyLayout) -> String {
        "SELECT device_id, user_id, revoked_at, tokens_expire_by, change_seq FROM \(layout.devices.quoted) "
            + "WHERE change_seq > $1 AND revoked_at IS NOT NULL ORDER BY change_seq LIMIT $2"
    }

    /// Rows of ``revokedDevicesQuery(_:)``; a row that is not a device the gateway wrote is skipped.
    static func revokedDevices(_ rows: PostgresRows) throws(PostgresFailure)
        -> [(device: DeviceID, revoked: RevokedDevice, sequence: Int64)]
    {
        try rows.expectColumns(5)
        var devices: [(device: DeviceID, revoked: RevokedDevice, sequence: Int64)] = []
        for row in 0..<rows.count {
            guard let text = rows.text(row, 0), let device = DeviceID(text), let user = rows.text(row, 1),
                let revokedAt = try rows.int64(row, 2)
            else { continue }
            devices.append(
                (device, RevokedDevice(user: CutoffUserKey(user), revokedAt: revokedAt, tokensExpireBy: try rows.int64(row, 3)),
                 try rows.int64(row, 4) ?? 0))
        }
        return devices
    }

    public func recordDevice(_ record: DeviceRecord) async throws {
        try CutoffUserID.validate(record.user)
        try await self.requireDevices()
        let layout = self.deviceLayout
        let statementTimeout = self.configuration.operationTimeout.millisecondsClamped
        let description = self.storeDescription
        try await self.withConnection { session in
            try Self.refusedDeviceWrite(layout, description) {
                try session.transaction {
                    try session.execute("SET LOCAL synchronous_commit = on")
                    try session.execute("SET LOCAL statement_timeout = \(statementTimeout)")
                    try session.execute(
                        """
                        INSERT INTO \(layout.devices.quoted)
                            (device_id, user_id, app, created_at, last_used_at, tokens_expire_by, refresh_generation,
                             refresh_expires_at)
                        VALUES ($1, $2, $3, $4, NULLIF($5, -1), NULLIF($6, -1), NULLIF($7, -1), NULLIF($8, -1))
                        """,
                        // -1 for "none": parameters have no NULL here, and times are never negative.
                        [
                            .text(record.device.text), .text(record.user), .text(record.app), .int8(record.createdAt),
                            .int8(record.lastUsedAt ?? -1), .int8(record.tokensExpireBy ?? -1),
                            .int8(record.refreshGeneration ?? -1), .int8(record.refreshExpiresAt ?? -1),
                        ]
                    )
                }
            }
        }
    }

    public func devices(user: String) async throws -> [DeviceRecord] {
        try CutoffUserID.validate(user)
        try await self.requireDevices()
        let layout = self.deviceLayout
        let description = self.storeDescription
        return try await self.withConnection { session in
            let rows = try session.query(
                """
                SELECT \(Self.deviceColumns)
                FROM \(layout.devices.quoted) WHERE user_id = $1 ORDER BY created_at DESC, device_id LIMIT $2
                """,
                [.text(user), .int8(Int64(maximumDevicesListed))]
            )
            return try Self.deviceRecords(rows, description)
        }
    }

    public func revokeDevice(user: String, device: DeviceID, at: Int64) async throws -> DeviceRevocation {
        try CutoffUserID.validate(user)
        guard at >= 0 else {
            throw CutoffStoreError(code: .invalidTime, message: "a revocation time must not be before 1970")
        }
        try await self.requireDevices()
        let layout = self.deviceLayout
        let channel = self.configuration.notifyChannel
        let statementTimeout = self.configuration.operationTimeout.millisecondsClamped
        let description = self.storeDescription
        return try await self.withConnection { session in
            try Self.refusedDeviceWrite(layout, description) {
                try session.transaction { () throws -> DeviceRevocation in
                    try session.execute("SET LOCAL synchronous_commit = on")
                    try session.execute("SET LOCAL statement_timeout = \(statementTimeout)")
                    let columns = Self.deviceColumns
                    // Locked, so two revocations at once keep the first time and take one number.
                    let current = try session.query(
                        "SELECT \(columns) FROM \(layout.devices.quoted) WHERE device_id = $1 AND user_id = $2 FOR UPDATE",
                        [.text(device.text), .text(user)])
                    guard let record = try Self.deviceRecords(current, description).first else {
                        throw CutoffStoreError(code: .unknownDevice, message: "the user has no device \(device.text)")
                    }
                    if record.revokedAt != nil {
                        return DeviceRevocation(record: record, changed: false)
                    }
                    // A number of the global counter, as a user row's change takes one: the feed carries it, and the
                    // marker moves (RP-table mode reloads on it). The row lock serializes the numbers in commit order.
                    let numbered = try session.query(
                        "UPDATE \(layout.global.quoted) SET change_seq = change_seq + 1 WHERE id = 1 RETURNING change_seq")
                    try numbered.expectColumns(1)
                    guard numbered.count > 0, let sequence = try numbered.int64(0, 0) else {
                        throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
                    }
                    let updated = try session.query(
                        """
                        UPDATE \(layout.devices.quoted) SET revoked_at = $3, change_seq = $4
                        WHERE device_id = $1 AND user_id = $2 RETURNING \(columns)
                        """,
                        [.text(device.text), .text(user), .int8(at), .int8(sequence)])
                    guard let revoked = try Self.deviceRecords(updated, description).first else {
                        throw CutoffStoreError(code: .storeUnavailable, message: "\(description): the device changed concurrently; retry")
                    }
                    // Sent at COMMIT: every instance reads the feed (or reloads) after the revocation is durable.
                    try session.execute("SELECT pg_notify($1, $2)", [.text(channel), .text(user)])
                    return DeviceRevocation(record: revoked, changed: true)
                }
            }
        }
    }

    static let deviceColumns =
        "device_id, user_id, app, created_at, last_used_at, tokens_expire_by, revoked_at, refresh_generation, refresh_expires_at"

    /// See ``CutoffStore/rotateRefresh(_:)``. One transaction with the device's row locked: of two uses of one token
    /// on two instances, the first rotates and the second finds an earlier generation and revokes the device.
    public func rotateRefresh(_ rotation: RefreshRotation) async throws -> RefreshOutcome {
        try await self.requireDevices()
        let layout = self.deviceLayout
        let channel = self.configuration.notifyChannel
        let statementTimeout = self.configuration.operationTimeout.millisecondsClamped
        let description = self.storeDescription
        return try await self.withConnection { session in
            try Self.refusedDeviceWrite(layout, description) {
                try session.transaction { () throws -> RefreshOutcome in
                    try session.execute("SET LOCAL synchronous_commit = on")
                    try session.execute("SET LOCAL statement_timeout = \(statementTimeout)")
                    let d = layout.devices.quoted
                    let current = try session.query(
                        "SELECT \(Self.deviceColumns) FROM \(d) WHERE device_id = $1 FOR UPDATE", [.text(rotation.device.text)])
                    guard let record = try Self.deviceRecords(current, description).first,
                        let generation = record.refreshGeneration
                    else { return .refused(.unknownDevice) }
                    if record.app != rotation.app { return .refused(.wrongApp) }
                    if record.revokedAt != nil { return .refused(.revoked) }
                    if rotation.generation == generation {
                        guard let expiresAt = record.refreshExpiresAt, expiresAt > rotation.now else {
                            return .refused(.expired)
                        }
                        let rotated = try session.query(
                            """
                            UPDATE \(d) SET refresh_generation = refresh_generation + 1, refresh_expires_at = $2,
                                last_used_at = $3,
                                tokens_expire_by = CASE WHEN tokens_expire_by IS NULL THEN NULL
                                                        ELSE greatest(tokens_expire_by, $4) END
                            WHERE device_id = $1 RETURNING \(Self.deviceColumns)
                            """,
                            [.text(rotation.device.text), .int8(rotation.refreshExpiresAt), .int8(rotation.now),
                             .int8(rotation.accessExpiresAt)])
                        guard let next = try Self.deviceRecords(rotated, description).first else {
                            throw CutoffStoreError(code: .storeUnavailable, message: "\(description): the device changed concurrently; retry")
                        }
                        return .rotated(next)
                    }
                    guard rotation.generation < generation else { return .refused(.unknownDevice) }
                    // Used before: revoked now, numbered and announced as any revocation.
                    let numbered = try session.query(
                        "UPDATE \(layout.global.quoted) SET change_seq = change_seq + 1 WHERE id = 1 RETURNING change_seq")
                    try numbered.expectColumns(1)
                    guard numbered.count > 0, let sequence = try numbered.int64(0, 0) else {
                        throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): the global row is missing")
                    }
                    let revoked = try session.query(
                        "UPDATE \(d) SET revoked_at = $2, change_seq = $3 WHERE device_id = $1 RETURNING \(Self.deviceColumns)",
                        [.text(rotation.device.text), .int8(rotation.now), .int8(sequence)])
                    guard let revokedRecord = try Self.deviceRecords(revoked, description).first else {
                        throw CutoffStoreError(code: .storeUnavailable, message: "\(description): the device changed concurrently; retry")
                    }
                    try session.execute("SELECT pg_notify($1, $2)", [.text(channel), .text(revokedRecord.user)])
                    return .reused(revokedRecord)
                }
            }
        }
    }

    /// Fails with ``CutoffStoreError/Code/noDevices`` while the devices table does not exist; makes the first call
    /// reach the database (and create it) if none did yet.
    private func requireDevices() async throws {
        if !self.keepsDevices {
            _ = try await self.changeMarker()
        }
        guard self.keepsDevices else {
            throw CutoffStoreError(
                code: .noDevices,
                message: "\(self.storeDescription) has no devices table \(self.deviceLayout.devices) (the role may not "
                    + "create it; see the warning logged at start)"
            )
        }
    }

    private static func deviceRecords(_ rows: PostgresRows, _ description: String) throws -> [DeviceRecord] {
        try rows.expectColumns(9)
        var records: [DeviceRecord] = []
        for row in 0..<rows.count {
            guard let text = rows.text(row, 0), let device = DeviceID(text), let user = rows.text(row, 1),
                let app = rows.text(row, 2), let createdAt = try rows.int64(row, 3)
            else {
                throw CutoffStoreError(code: .invalidStoreFile, message: "\(description): a devices row is malformed")
            }
            records.append(
                DeviceRecord(
                    device: device, user: user, app: app, createdAt: createdAt,
                    tokensExpireBy: try rows.int64(row, 5), lastUsedAt: try rows.int64(row, 4),
                    revokedAt: try rows.int64(row, 6), refreshGeneration: try rows.int64(row, 7),
                    refreshExpiresAt: try rows.int64(row, 8)))
        }
        return records
    }

    private static func refusedDeviceWrite<T>(_ layout: CopyLayout, _ description: String, _ body: () throws -> T) throws -> T {
        try PostgresPermissionDenied.mapping(body) {
            PostgresPermissionDenied.error(
                description,
                refused: "the configured role may not write tokengate's devices table",
                remedy: "GRANT SELECT, INSERT, UPDATE ON \(layout.devices), \(layout.global) to it"
            )
        }
    }
}
