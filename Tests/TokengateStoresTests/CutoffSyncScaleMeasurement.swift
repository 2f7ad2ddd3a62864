//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOConcurrencyHelpers
import Testing
import TokengateTokens

@testable import TokengateStores

/// Measures the sync service against a real SQLite store of many users: the first load (a gateway's start), the
/// resident memory then, and how long after another process's commit (`tokengate revoke`'s path) a revocation is
/// enforced while revocations arrive at a steady rate; and the same for two instances sharing a real PostgreSQL
/// (copy mode), revocations written through one (the admin API's path) and timed until the other enforces them.
///
/// Not a CI test: filling the store takes a minute per ten million rows. Run it with
/// `TOKENGATE_SCALE_USERS=1000000 swift test -c release --filter CutoffSyncScaleMeasurement` (or through
/// `scripts/cutoff-scale.sh`); it prints the figures and checks only that every revocation was enforced.
@Suite("Cutoff sync scale measurement", .serialized)
struct CutoffSyncScaleMeasurement {
    static let users = ProcessInfo.processInfo.environment["TOKENGATE_SCALE_USERS"].flatMap { Int($0) }
    static let revocations = ProcessInfo.processInfo.environment["TOKENGATE_SCALE_REVOCATIONS"].flatMap { Int($0) } ?? 300
    static let rate = ProcessInfo.processInfo.environment["TOKENGATE_SCALE_RATE"].flatMap { Double($0) } ?? 100

    @Test("SQLite: start, memory, and revocations by another process at a steady rate", .enabled(if: Self.users != nil))
    func sqlite() async throws {
        let count = try #require(Self.users)
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.db")
        try await SQLiteCutoffStore.open(path: path).close()
        // The rows, as a bulk import by the site would write them (one transaction).
        try runProcess("/usr/bin/env", [
            "python3", "-c",
            """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            n = int(sys.argv[2])
            c.executemany("INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES (?, ?, 0)",
                          (("user-%d" % i, 1000 + i % 1000) for i in range(n)))
            c.commit()
            c.close()
            """,
            path, "\(count)",
        ])

        let residentBefore = SnapshotScaleMeasurement.residentBytes()
        let store = try await SQLiteCutoffStore.open(path: path)
        let published = PublishedSnapshots()
        let service = CutoffSyncService(store: store, publish: published.publish)
        let started = ContinuousClock.now
        try await service.start()
        let startup = ContinuousClock.now - started
        let resident = SnapshotScaleMeasurement.residentBytes()
        #expect(published.latest?.users.count == count)
        let run = Task { await service.run() }

        // Another process commits revocations at the rate; each line it prints is the commit's wall-clock time.
        let now = Int64(Date().timeIntervalSince1970)
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        writer.arguments = [
            "python3", "-u", "-c",
            """
            import sqlite3, sys, time
            c = sqlite3.connect(sys.argv[1], isolation_level=None)
            c.execute("PRAGMA busy_timeout = 5000")
            n, rate, at = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
            start = time.time()
            for i in range(n):
                time.sleep(max(0, start + i / rate - time.time()))
                c.execute("INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES (?, ?, 0) "
                          "ON CONFLICT (user_id) DO UPDATE SET revoked_before = excluded.revoked_before",
                          ("user-%d" % (i * 7919 % int(sys.argv[5])), at))
                print(i, time.time(), flush=True)
            """,
            path, "\(Self.revocations)", "\(Self.rate)", "\(now)", "\(count)",
        ]
        let output = Pipe()
        writer.standardOutput = output
        try writer.run()

        var latencies: [Double] = []
        let lines = output.fileHandleForReading
        var buffer = Data()
        while latencies.count < Self.revocations {
            let chunk = lines.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                let fields = line.split(separator: " ")
                guard fields.count == 2, let index = Int(fields[0]), let committed = Double(fields[1]) else { continue }
                let user = CutoffUserKey("user-\(index * 7919 % count)")
                while published.latest?.users[user]?.revokedBefore != now {
                    try await Task.sleep(for: .milliseconds(1))
                }
                latencies.append(Date().timeIntervalSince1970 - committed)
            }
        }
        writer.waitUntilExit()
        run.cancel()
        await run.value
        try await store.close()

        latencies.sort()
        func percentile(_ p: Double) -> Int { Int(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] * 1000) }
        print("SCALE sync sqlite users=\(count) startup=\(startup) resident=\((resident - residentBefore) >> 20) MiB "
            + "(\((resident - residentBefore) / count) bytes/user) revocations=\(latencies.count) at \(Self.rate)/s: "
            + "enforced after p50=\(percentile(0.5)) ms p99=\(percentile(0.99)) ms max=\(percentile(1)) ms")
        #expect(latencies.count == Self.revocations)
    }

    @Test(
        "PostgreSQL: two instances, their start, and revocations at one enforced at the other",
        .enabled(if: Self.users != nil && PostgresTestServer.url != nil)
    )
    func postgres() async throws {
        let count = try #require(Self.users)
        let configuration = try PostgresTestServer.configuration()
        let table = configuration.table
        defer { _ = try? PostgresTestServer.psql("DROP TABLE IF EXISTS \(table); DROP TABLE IF EXISTS \(table)_global") }
        try await withRunningStore(configuration) { store in _ = try await store.load() }
        // The rows, as a site's bulk import would write them: one statement, the row triggers off for its duration
        // (the feed starts with a full load, which reads them all).
        _ = try PostgresTestServer.psql(
            """
            ALTER TABLE \(table) DISABLE TRIGGER USER;
            INSERT INTO \(table) (user_id, revoked_before, updated_at)
                SELECT 'user-' || i, 1000 + i % 1000, 0 FROM generate_series(0, \(count - 1)) AS i;
            ALTER TABLE \(table) ENABLE TRIGGER USER;
            ANALYZE \(table);
            """)

        try await withRunningStore(configuration) { storeA in
            try await withRunningStore(configuration) { storeB in
                let publishedA = PublishedSnapshots()
                let publishedB = PublishedSnapshots()
                let a = CutoffSyncService(store: storeA, publish: publishedA.publish)
                let b = CutoffSyncService(store: storeB, publish: publishedB.publish)
                let residentBefore = SnapshotScaleMeasurement.residentBytes()
                var started = ContinuousClock.now
                try await a.start()
                let startupA = ContinuousClock.now - started
                let resident = SnapshotScaleMeasurement.residentBytes()
                started = ContinuousClock.now
                try await b.start()
                let startupB = ContinuousClock.now - started
                #expect(publishedB.latest?.users.count == count)
                let runA = Task { await a.run() }
                let runB = Task { await b.run() }
                defer {
                    runA.cancel()
                    runB.cancel()
                }
                #expect(await eventually(timeout: .seconds(10)) { storeA.isListening && storeB.isListening })

                // Revocations at A at the rate (each returns once committed and NOTIFY sent), timed at B.
                let at = Int64(Date().timeIntervalSince1970)
                let committed = NIOLockedValueBox<[ContinuousClock.Instant]>([])
                let writer = Task {
                    let begin = ContinuousClock.now
                    for index in 0..<Self.revocations {
                        try await Task.sleep(until: begin.advanced(by: .seconds(Double(index) / Self.rate)))
                        try await a.passwordChanged(user: "user-\(index &* 7_919 % count)", at: at)
                        let now = ContinuousClock.now
                        committed.withLockedValue { $0.append(now) }
                    }
                }
                var latencies: [Double] = []
                let deadline = ContinuousClock.now.advanced(by: .seconds(Double(Self.revocations) / Self.rate + 30))
                for index in 0..<Self.revocations {
                    let user = CutoffUserKey("user-\(index &* 7_919 % count)")
                    while ContinuousClock.now < deadline,
                        committed.withLockedValue({ $0.count }) <= index
                            || publishedB.latest?.users[user]?.revokedBefore != at
                    {
                        try await Task.sleep(for: .milliseconds(1))
                    }
                    guard ContinuousClock.now < deadline else { break }
                    let elapsed = ContinuousClock.now - committed.withLockedValue { $0[index] }
                    latencies.append(Double(elapsed.components.attoseconds) / 1e18 + Double(elapsed.components.seconds))
                }
                try await writer.value

                latencies.sort()
                func percentile(_ p: Double) -> Int {
                    latencies.isEmpty ? -1 : Int(latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] * 1000)
                }
                print("SCALE sync postgres users=\(count) startup A=\(startupA) B=\(startupB) "
                    + "resident one instance=\((resident - residentBefore) >> 20) MiB revocations=\(latencies.count) "
                    + "at \(Self.rate)/s written at A, enforced at B after p50=\(percentile(0.5)) ms "
                    + "p99=\(percentile(0.99)) ms max=\(percentile(1)) ms")
                #expect(latencies.count == Self.revocations)
            }
        }
    }
}
