//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import TokengateStores
import TokengateTokens

/// Keeps a copy of the last good cutoff snapshot in a file (`cutoffs.postgres.cache_file`), so that a
/// gateway restarted while its database is down can still enforce every cutoff it knew, instead of
/// refusing to start. The file is only trusted when it is younger than the store's `stale_after`.
struct SnapshotCache: Service {
    let path: String
    let sync: CutoffSyncService
    let logger: Logger

    /// Keeps the file up to date (``SnapshotCacheWriter``), checked every second, until shutdown.
    func run() async throws {
        await cancelWhenGracefulShutdown {
            var writer = SnapshotCacheWriter(path: self.path, logger: self.logger)
            while !Task.isCancelled {
                let snapshot = await self.sync.snapshot
                let lastSync = await self.sync.lastSyncAt
                writer.tick(snapshot: snapshot, lastSync: lastSync, now: .now())
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Replaces the file the way key files are written: created with mode 0600 (user ids are personal data)
    /// under an exclusive temporary name, synced, then renamed over the old one.
    static func write(_ snapshot: CutoffSnapshot, to path: String) throws {
        let data = try snapshot.jsonData()
        try FileOutput.write(String(decoding: data, as: UTF8.self), to: path, mode: 0o600)
    }

    /// A snapshot read back from the cache file.
    struct Loaded {
        var snapshot: CutoffSnapshot
        /// UNIX seconds when a running gateway last confirmed the snapshot against the store: the file's
        /// modification time (``run()`` touches it after every successful sync).
        var savedAt: Int64
    }

    /// The cached snapshot, if the file exists, parses, and is at most `maxAge` old.
    static func load(path: String, maxAge: Duration, logger: Logger) -> Loaded? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let modified = attributes[.modificationDate] as? Date
        else {
            return nil
        }
        let age = Date().timeIntervalSince(modified)
        guard age <= Double(maxAge.components.seconds) else {
            logger.error("the cutoff cache file is too old to trust", metadata: ["path": "\(path)", "age_s": "\(Int(age))"])
            return nil
        }
        do {
            return Loaded(
                snapshot: try CutoffSnapshot.load(jsonFile: path),
                savedAt: Int64(modified.timeIntervalSince1970.rounded(.down))
            )
        } catch {
            logger.error("the cutoff cache file cannot be read", metadata: ["path": "\(path)", "error": "\(error)"])
            return nil
        }
    }
}
