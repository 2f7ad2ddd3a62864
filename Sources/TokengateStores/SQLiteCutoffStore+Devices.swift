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
            INSERT INTO devices (device_id, user_id, app, created_at, last_used_at, tokens_expire_by)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6)
            """
        try await self.run(
            sql,
            [
                .text(record.device.text), .text(record.user), .text(record.app), .integer(.init(record.createdAt)),
                Self.integer(record.lastUsedAt), Self.integer(record.tokensExpireBy),
            ],
            writing: true
        ) { _ in }
    }

    public func devices(user: String) async throws -> [DeviceRecord] {
        try CutoffUserID.validate(user)
        let sql = """
            SELECT device_id, user_id, app, created_at, last_used_at, tokens_expire_by, revoked_at FROM devices
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
            RETURNING device_id, user_id, app, created_at, last_used_at, tokens_expire_by, revoked_at
            """,
            [.text(device.text), .text(user), .integer(.init(at))],
            writing: true
        )
        if let row = changed.first {
            return DeviceRevocation(record: try self.deviceRecord(row), changed: true)
        }
        let current = try await self.rows(
            """
            SELECT device_id, user_id, app, created_at, last_used_at, tokens_expire_by, revoked_at FROM devices
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
        guard columns.count == 7, let text = columns[0].data.string, let device = DeviceID(text),
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
            revokedAt: try self.time(columns[6].data)
        )
    }

    private static func integer(_ value: Int64?) -> SQLiteData {
        value.map { .integer(.init($0)) } ?? .null
    }
}
