//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import SQLiteNIO
import TokengateTokens

// MARK: Devices: the `devices` table of schema version 3.

extension SQLiteCutoffStore {
    public nonisolated var keepsDevices: Bool { true }

    public func recordDevice(_ record: DeviceRecord) async throws {
        try CutoffUserID.validate(record.user)
        let sql = """
            INSERT INTO devices
                (device_id, user_id, app, created_at, last_used_at, tokens_expire_by, refresh_generation, refresh_expires_at)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
            """
        try await self.run(
            sql,
            [
                .text(record.device.text), .text(record.user), .text(record.app), .integer(.init(record.createdAt)),
                Self.integer(record.lastUsedAt), Self.integer(record.tokensExpireBy),
                Self.integer(record.refreshGeneration), Self.integer(record.refreshExpiresAt),
            ],
            writing: true
        ) { _ in }
    }

    public func devices(user: String) async throws -> [DeviceRecord] {
        try CutoffUserID.validate(user)
        let sql = """
            SELECT \(Self.deviceColumns) FROM devices
            WHERE user_id = ?1 ORDER BY created_at DESC, device_id LIMIT ?2
            """
        let rows = try await self.rows(sql, [.text(user), .integer(maximumDevicesListed)])
        return try rows.map { try self.deviceRecord($0) }
    }

    public func revokeDevice(user: String, device: DeviceID, at: Int64) async throws -> DeviceRevocation {
        try CutoffUserID.validate(user)
        guard at >= 0 else {
            throw CutoffStoreError(code: .invalidTime, message: "a revocation time must not be before 1970")
        }
        // One statement decides: only a device of this user not revoked yet changes, so two revocations at once
        // keep the first time, and a device id of another user is "unknown" rather than revoked.
        let changed = try await self.rows(
            """
            UPDATE devices SET revoked_at = ?3 WHERE device_id = ?1 AND user_id = ?2 AND revoked_at IS NULL
            RETURNING \(Self.deviceColumns)
            """,
            [.text(device.text), .text(user), .integer(.init(at))],
            writing: true
        )
        if let row = changed.first {
            return DeviceRevocation(record: try self.deviceRecord(row), changed: true)
        }
        let current = try await self.rows(
            """
            SELECT \(Self.deviceColumns) FROM devices
            WHERE device_id = ?1 AND user_id = ?2
            """,
            [.text(device.text), .text(user)]
        )
        guard let row = current.first else {
            throw CutoffStoreError(code: .unknownDevice, message: "the user has no device \(device.text)")
        }
        return DeviceRevocation(record: try self.deviceRecord(row), changed: false)
    }

    private nonisolated func deviceRecord(_ row: SQLiteRow) throws -> DeviceRecord {
        let columns = row.columns
        guard columns.count == 9, let text = columns[0].data.string, let device = DeviceID(text),
            let user = columns[1].data.string, let app = columns[2].data.string,
            let createdAt = try self.time(columns[3].data)
        else {
            throw CutoffStoreError(
                code: .invalidStoreFile, message: "\(self.storeDescription): a devices row is malformed")
        }
        return DeviceRecord(
            device: device,
            user: user,
            app: app,
            createdAt: createdAt,
            tokensExpireBy: try self.time(columns[5].data),
            lastUsedAt: try self.time(columns[4].data),
            revokedAt: try self.time(columns[6].data),
            refreshGeneration: try self.time(columns[7].data),
            refreshExpiresAt: try self.time(columns[8].data)
        )
    }

    static let deviceColumns =
        "device_id, user_id, app, created_at, last_used_at, tokens_expire_by, revoked_at, refresh_generation, refresh_expires_at"

    public func rotateRefresh(_ rotation: RefreshRotation) async throws -> RefreshOutcome {
        let device = SQLiteData.text(rotation.device.text)
        // One statement decides the rotation: of two uses of the same token (two instances, an app and a thief)
        // exactly one moves the generation on, and the other then finds it moved.
        let rotated = try await self.rows(
            """
            UPDATE devices SET refresh_generation = refresh_generation + 1, refresh_expires_at = ?3, last_used_at = ?4,
                tokens_expire_by = CASE WHEN tokens_expire_by IS NULL THEN NULL ELSE max(tokens_expire_by, ?5) END
            WHERE device_id = ?1 AND refresh_generation = ?2 AND app = ?6 AND revoked_at IS NULL
                AND refresh_expires_at > ?4
            RETURNING \(Self.deviceColumns)
            """,
            [
                device, .integer(.init(rotation.generation)), .integer(.init(rotation.refreshExpiresAt)),
                .integer(.init(rotation.now)), .integer(.init(rotation.accessExpiresAt)), .text(rotation.app),
            ],
            writing: true
        )
        if let row = rotated.first {
            return .rotated(try self.deviceRecord(row))
        }
        let current = try await self.rows("SELECT \(Self.deviceColumns) FROM devices WHERE device_id = ?1", [device])
        guard let row = current.first else { return .refused(.unknownDevice) }
        let record = try self.deviceRecord(row)
        guard let generation = record.refreshGeneration else { return .refused(.unknownDevice) }
        if record.app != rotation.app { return .refused(.wrongApp) }
        if record.revokedAt != nil { return .refused(.revoked) }
        if rotation.generation < generation {
            // Used before: whoever holds it now, the device is no longer the user's alone.
            let revoked = try await self.rows(
                "UPDATE devices SET revoked_at = ?2 WHERE device_id = ?1 AND revoked_at IS NULL RETURNING \(Self.deviceColumns)",
                [device, .integer(.init(rotation.now))],
                writing: true
            )
            guard let revokedRow = revoked.first else { return .refused(.revoked) }
            return .reused(try self.deviceRecord(revokedRow))
        }
        if rotation.generation == generation { return .refused(.expired) }
        return .refused(.unknownDevice)
    }

    private static func integer(_ value: Int64?) -> SQLiteData {
        value.map { .integer(.init($0)) } ?? .null
    }
}
