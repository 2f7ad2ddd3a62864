//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateTokens

@testable import TokengateStores

/// Devices in the stores that keep them (SQLite; PostgreSQL in both modes), through the sync service as the gateway
/// uses them: recorded, listed, revoked one by one, carried to every reader of the same store, and forgotten by the
/// snapshot once their tokens are dead anyway.
@Suite("Devices in the cutoff stores", .serialized)
struct DeviceStoreTests {
    static func record(_ user: String, app: String = "ios", at: Int64 = 1000, expires: Int64? = 4600) throws -> DeviceRecord {
        DeviceRecord(device: try #require(DeviceID.random()), user: user, app: app, createdAt: at, tokensExpireBy: expires)
    }

    static func service(_ store: any CutoffStore, _ published: PublishedSnapshots, clock: ManualClock) -> CutoffSyncService {
        CutoffSyncService(
            store: store,
            configuration: .init(fullReloadInterval: .seconds(3600), deviceExpiryMargin: .seconds(60)),
            now: clock.function,
            publish: published.publish
        )
    }

    @Test("SQLite: record, list, revoke; the revocation is published before it returns and a second one changes nothing")
    func sqliteRecordListRevoke() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let published = PublishedSnapshots()
        let clock = ManualClock(2000)
        let service = Self.service(store, published, clock: clock)
        try await service.start()
        #expect(service.keepsDevices)

        let phone = try Self.record("alice", at: 1000)
        let tablet = try Self.record("alice", app: DeviceRecord.copiedByHand, at: 1500, expires: nil)
        let other = try Self.record("bob", at: 1200)
        for device in [phone, tablet, other] {
            try await service.recordDevice(device)
        }
        let listed = try await service.devices(user: "alice")
        #expect(listed.map(\.device) == [tablet.device, phone.device], "newest first, only alice's")
        #expect(listed.first?.app == DeviceRecord.copiedByHand && listed.first?.tokensExpireBy == nil)
        #expect(listed.allSatisfy { $0.revokedAt == nil })

        let receipt = try await service.revokeDevice(user: "alice", device: phone.device)
        #expect(receipt.revocation.changed && receipt.revocation.record.revokedAt == 2000)
        let snapshot = try #require(published.latest)
        #expect(snapshot.generation == receipt.generation)
        #expect(snapshot.revocation(subject: "alice", issuedAt: 1000, kind: .api, device: phone.device) == .deviceRevoked)
        #expect(snapshot.revocation(subject: "alice", issuedAt: 1000, kind: .api, device: tablet.device) == nil)
        #expect(snapshot.revocation(subject: "alice", issuedAt: 1000, kind: .api, device: nil) == nil, "a token without a device lives")

        let again = try await service.revokeDevice(user: "alice", device: phone.device)
        #expect(!again.revocation.changed && again.revocation.record.revokedAt == 2000, "the first time is kept")
        // Another user's device id is unknown to this user: never revoked through them.
        await #expect(throws: CutoffStoreError(code: .unknownDevice, message: "")) {
            try await service.revokeDevice(user: "alice", device: other.device)
        }
        #expect(published.latest?.revokedDevices[other.device] == nil)
        try await store.close()

        // Reopened (a restart): the revoked device is loaded with the rest.
        let reopened = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let restarted = PublishedSnapshots()
        let second = Self.service(reopened, restarted, clock: clock)
        try await second.start()
        #expect(restarted.latest?.revokedDevices[phone.device]?.user == "alice")
        #expect(restarted.latest?.revokedDevices.count == 1)
        try await reopened.close()
    }

    @Test("SQLite: another process's revocation (the CLI) reaches a running service through the change feed")
    func sqliteFeedCarriesAnotherProcessesRevocation() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        let gateway = try await SQLiteCutoffStore.open(path: path)
        let published = PublishedSnapshots()
        let clock = ManualClock(2000)
        let service = Self.service(gateway, published, clock: clock)
        try await service.start()
        let phone = try Self.record("alice")
        try await service.recordDevice(phone)

        let cli = try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
        _ = try await cli.revokeDevice(user: "alice", device: phone.device, at: 1900)
        try await cli.close()
        await service.poll()
        #expect(published.latest?.revokedDevices[phone.device]?.revokedAt == 1900)
        // From the feed, not a full reload: the sequence it read is past the revocation's number.
        let numbered = try pythonSQLite(path, "SELECT change_seq FROM devices WHERE device_id = '\(phone.device.text)'")
        #expect(Int(numbered.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 > 0)
        try await gateway.close()
    }

    @Test("an entry leaves the snapshot once a later cutoff or the last exp kills every token of the device")
    func pruning() async throws {
        let directory = try TemporaryDirectory()
        let store = try await SQLiteCutoffStore.open(path: directory.file("cutoffs.db"))
        let published = PublishedSnapshots()
        let clock = ManualClock(2000)
        let service = Self.service(store, published, clock: clock)
        try await service.start()
        let expiring = try Self.record("alice", expires: 3000)
        let forever = try Self.record("alice", expires: nil)
        let bobs = try Self.record("bob", expires: nil)
        for device in [expiring, forever, bobs] {
            try await service.recordDevice(device)
            _ = try await service.revokeDevice(user: device.user, device: device.device)
        }
        #expect(published.latest?.revokedDevices.count == 3)

        // Within the margin after the last exp, and with cutoffs no later than the revocation: all kept.
        clock.now = 3050
        try await service.passwordChanged(user: "bob", at: 2000)
        try await service.reload()
        #expect(published.latest?.revokedDevices.count == 3, "a cutoff at the revocation's second kills nothing more")

        clock.now = 3061
        try await service.disableMobileApps(user: "bob", at: 3061)
        try await service.reload()
        let devices = try #require(published.latest?.revokedDevices)
        #expect(devices[expiring.device] == nil, "past exp + margin: dead anyway")
        #expect(devices[bobs.device] == nil, "bob's api cutoff after the revocation kills it anyway")
        #expect(devices[forever.device] != nil, "a device whose tokens never expire stays until a cutoff")
        // The store keeps the rows: the listing still shows them revoked.
        #expect(try await service.devices(user: "alice").allSatisfy { $0.revokedAt == 2000 })
        try await store.close()
    }

    @Test("a version 2 SQLite store is brought to version 3 on open and keeps its cutoffs")
    func sqliteMigration() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        // A version 2 store as an earlier tokengate left it: version 3's additions taken out again.
        let store = try await SQLiteCutoffStore.open(path: path)
        try await store.passwordChanged(user: "carol", at: 700)
        try await store.close()
        for statement in [
            "DROP TRIGGER devices_revoked_numbered", "DROP TRIGGER devices_deleted", "DROP TABLE devices",
            "UPDATE schema_version SET version = 2",
        ] {
            try pythonSQLite(path, statement)
        }
        #expect(try pythonSQLite(path, "SELECT version FROM schema_version").hasPrefix("2"))

        let upgraded = try await SQLiteCutoffStore.open(path: path, createIfMissing: false)
        #expect(try await upgraded.load().users["carol"] == UserCutoffs(revokedBefore: 700))
        let phone = try Self.record("carol")
        try await upgraded.recordDevice(phone)
        #expect(try await upgraded.devices(user: "carol").map(\.device) == [phone.device])
        try await upgraded.close()
        #expect(try pythonSQLite(path, "SELECT version FROM schema_version").hasPrefix("3"))
    }

    @Test("the JSON file keeps no devices, and says so")
    func jsonFileHasNone() async throws {
        let directory = try TemporaryDirectory()
        try "{}".write(toFile: directory.file("cutoffs.json"), atomically: true, encoding: .utf8)
        let store = JSONFileCutoffStore(path: directory.file("cutoffs.json"))
        #expect(!store.keepsDevices)
        await #expect(throws: CutoffStoreError(code: .noDevices, message: "")) {
            try await store.revokeDevice(user: "alice", device: DeviceID(high: 1, low: 2), at: 0)
        }
    }

    // MARK: PostgreSQL

    @Test(
        "PostgreSQL: a revocation through one instance reaches another sharing the database at once (notification)",
        .enabled(if: PostgresTestServer.url != nil, PostgresTestServer.skipMessage))
    func postgresTwoInstances() async throws {
        let configuration = try PostgresTestServer.configuration()
        try await withRunningStore(configuration) { first in
            try await withRunningStore(configuration) { second in
                let clock = ManualClock(Int64(Date().timeIntervalSince1970))
                let one = PublishedSnapshots()
                let two = PublishedSnapshots()
                let a = Self.service(first, one, clock: clock)
                let b = Self.service(second, two, clock: clock)
                try await a.start()
                try await b.start()
                #expect(first.keepsDevices && second.keepsDevices)
                let runner = Task { await b.run() }
                defer { runner.cancel() }

                let phone = try Self.record("alice", at: clock.now, expires: clock.now + 3600)
                try await a.recordDevice(phone)
                #expect(try await b.devices(user: "alice").map(\.device) == [phone.device], "one table for every instance")
                _ = try await a.revokeDevice(user: "alice", device: phone.device)
                let reached = await eventually(timeout: .seconds(10)) {
                    two.latest?.revokedDevices[phone.device] != nil
                }
                #expect(reached, "the other instance enforces it without a restart")
                let again = try await b.revokeDevice(user: "alice", device: phone.device)
                #expect(!again.revocation.changed)
                // A full reload (a restart) finds it in the table too.
                let fresh = PublishedSnapshots()
                let c = Self.service(second, fresh, clock: clock)
                try await c.start()
                #expect(fresh.latest?.revokedDevices[phone.device]?.user == "alice")
            }
        }
        try PostgresTestServer.psql(
            "DROP TABLE \(configuration.table), \(configuration.table)_global, \(configuration.table)_devices")
    }

    @Test(
        "PostgreSQL RP-table mode: devices live in tokengate's own table, and a revocation is enforced by a reload",
        .enabled(if: PostgresTestServer.url != nil, PostgresTestServer.skipMessage))
    func postgresRPTableMode() async throws {
        let rpTable = PostgresTestServer.uniqueName("rp_users")
        try PostgresTestServer.psql("CREATE TABLE \(rpTable) (id bigint PRIMARY KEY, password_changed_at timestamptz)")
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(rpTable)") }
        let configuration = try PostgresTestServer.configuration(
            rpTable: PostgresCutoffStore.RPTable(table: rpTable))
        try await withRunningStore(configuration) { store in
            let clock = ManualClock(Int64(Date().timeIntervalSince1970))
            let published = PublishedSnapshots()
            let service = Self.service(store, published, clock: clock)
            try await service.start()
            #expect(store.keepsDevices)
            let phone = try Self.record("42", at: clock.now, expires: clock.now + 3600)
            try await service.recordDevice(phone)
            _ = try await store.revokeDevice(user: "42", device: phone.device, at: clock.now)
            await service.poll()
            #expect(published.latest?.revokedDevices[phone.device] != nil, "the marker moved: a reload took it")
        }
        try PostgresTestServer.psql(
            "DROP TABLE IF EXISTS \(configuration.table)_global, \(configuration.table)_devices")
    }
}
