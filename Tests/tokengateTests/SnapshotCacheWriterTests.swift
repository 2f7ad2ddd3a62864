//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import Testing
import TokengateTestSupport
import TokengateTokens

@testable import tokengate

/// The PostgreSQL store's snapshot cache file, tick by tick against a real file with a hand-moved clock: a file
/// removed or replaced is written again at the next tick even when nothing changed, and a write that keeps
/// failing is logged when it begins, once a minute with the count, and when it works again.
@Suite struct SnapshotCacheWriterTests {
    /// A directory of its own, removed at the end.
    private final class Directory {
        let path = NSTemporaryDirectory() + "tokengate-cache-" + UUID().uuidString

        init() throws {
            try FileManager.default.createDirectory(atPath: self.path, withIntermediateDirectories: false)
        }

        deinit {
            try? FileManager.default.removeItem(atPath: self.path)
        }
    }

    private static let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
    private static let snapshot = CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: 100)], generation: 7)

    private static func modificationTime(_ path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        let date = try #require(attributes[.modificationDate] as? Date)
        return Int64(date.timeIntervalSince1970)
    }

    @Test func aRemovedFileIsWrittenAgainAtTheNextTickThoughNothingChanged() throws {
        let directory = try Directory()
        let path = directory.path + "/cutoffs.cache"
        let lines = RecordedLogLines()
        var writer = SnapshotCacheWriter(path: path, logger: lines.logger())
        let lastSync: Int64 = 1_714_564_800

        writer.tick(snapshot: Self.snapshot, lastSync: lastSync, now: Self.start)
        #expect(try CutoffSnapshot.load(jsonFile: path).users["bob"]?.revokedBefore == 100)
        #expect(try Self.modificationTime(path) == lastSync, "the file's age is the last sync's")

        // Same generation, same last sync: a quiet store. The file is still written again.
        try FileManager.default.removeItem(atPath: path)
        writer.tick(snapshot: Self.snapshot, lastSync: lastSync, now: Self.start + .seconds(1))
        #expect(try CutoffSnapshot.load(jsonFile: path).users["bob"]?.revokedBefore == 100)
        #expect(try Self.modificationTime(path) == lastSync, "a rewrite must not make the snapshot look fresher")

        // Replaced by another file (an old copy put back): written again too.
        try Data("{}".utf8).write(to: URL(fileURLWithPath: path + ".other"))
        #expect(rename(path + ".other", path) == 0)
        writer.tick(snapshot: Self.snapshot, lastSync: lastSync + 1, now: Self.start + .seconds(2))
        #expect(try CutoffSnapshot.load(jsonFile: path).users["bob"]?.revokedBefore == 100)
        #expect(try Self.modificationTime(path) == lastSync + 1)

        #expect(lines.all.map(\.message) == [
            "the cutoff cache file was removed or replaced; writing it again",
            "the cutoff cache file was removed or replaced; writing it again",
        ], "\(lines.all)")
    }

    @Test func aFileNeverSyncedIsLeftAsItIs() throws {
        let directory = try Directory()
        let path = directory.path + "/cutoffs.cache"
        var writer = SnapshotCacheWriter(path: path, logger: RecordedLogLines().logger())
        writer.tick(snapshot: Self.snapshot, lastSync: nil, now: Self.start)
        #expect(!FileManager.default.fileExists(atPath: path), "a gateway started from its cache keeps the file as it is")
    }

    @Test func aDirectoryInItsPlaceIsLoggedWhenItBeginsOncePerMinuteAndWhenItEnds() throws {
        let directory = try Directory()
        let path = directory.path + "/cutoffs.cache"
        let lines = RecordedLogLines()
        var writer = SnapshotCacheWriter(path: path, logger: lines.logger())
        var now = Self.start
        var lastSync: Int64 = 1_714_564_800
        writer.tick(snapshot: Self.snapshot, lastSync: lastSync, now: now)

        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        for _ in 0..<130 {  // 130 ticks a second apart, the store syncing all along
            now = now + .seconds(1)
            lastSync += 1
            writer.tick(snapshot: Self.snapshot, lastSync: lastSync, now: now)
        }
        try FileManager.default.removeItem(atPath: path)
        now = now + .seconds(1)
        writer.tick(snapshot: Self.snapshot, lastSync: lastSync, now: now)
        now = now + .seconds(1)
        writer.tick(snapshot: Self.snapshot, lastSync: lastSync, now: now)

        #expect(lines.all.map(\.message) == [
            "the cutoff cache file was removed or replaced; writing it again",
            "cannot write the cutoff cache file; retrying every second, logging at most once a minute",
            "still cannot write the cutoff cache file",
            "still cannot write the cutoff cache file",
            "the cutoff cache file is written again",
        ], "\(lines.all)")
        #expect(lines.all.map { $0.metadata["failures"] } == [nil, "1", "60", "60", "130"], "\(lines.all)")
        #expect(lines.all.last?.level == .notice)
        #expect(try CutoffSnapshot.load(jsonFile: path).users["bob"]?.revokedBefore == 100)
        #expect(try Self.modificationTime(path) == lastSync)
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(leftovers == ["cutoffs.cache"], "no temporary file is left behind by the failed writes")
    }
}
