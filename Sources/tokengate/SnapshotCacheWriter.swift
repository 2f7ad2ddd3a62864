//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import NIOCore
import TokengateGateway
import TokengateStores
import TokengateTokens

/// What ``SnapshotCache`` does at each tick (every second): keeps the cache file equal to the last snapshot
/// confirmed by the store, with the time of that confirmation as its modification time.
///
/// A value driven by ``tick(snapshot:lastSync:now:)``, so tests run its ticks against a real file without
/// waiting for a clock.
///
/// ### The file changes under us
/// The file is written again not only when the snapshot's generation changed but whenever the path no longer
/// names the file this writer wrote (removed, replaced by another file, by a directory): a quiet store may not
/// change its generation for days, and a restart while the database is down needs the file. Because the
/// modification time is always the last sync's (not the time of writing), a rewrite never makes an old
/// snapshot look fresher than it is; `load` judges the age the same way whenever the file was written.
///
/// ### Failures
/// A write that fails is tried again at the next tick, but the log gets a line when the failures begin, then at
/// most one per ``reportInterval`` with the number of failed attempts since the last line (``FailureLogThrottle``),
/// and one when the file is written again: a line a second buried everything else in the log.
struct SnapshotCacheWriter {
    /// While writes keep failing, a line at most this often (the cutoff store's outage log uses the same).
    static let reportInterval: TimeAmount = .seconds(60)

    let path: String
    private let logger: Logger
    /// The generation in the file this writer wrote, and the file's identity right after it was written.
    private var written: (generation: UInt64, file: FileIdentity)?
    /// The last sync the file's modification time says.
    private var stampedSync: Int64?
    private var reports = FailureLogThrottle(interval: SnapshotCacheWriter.reportInterval)
    /// The failed attempts not yet followed by a "written again" line: when the first and the last failed, how
    /// many, and whether a line said so (one held back by the throttle has not).
    private var failing: (since: NIODeadline, last: NIODeadline, attempts: Int, reported: Bool)?

    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Brings the file up to date with `snapshot`, confirmed by the store at `lastSync` (UNIX seconds); nothing
    /// while the store has never been synced (a gateway started from this very file: it is kept as it is).
    mutating func tick(snapshot: CutoffSnapshot, lastSync: Int64?, now: NIODeadline) {
        guard let lastSync else { return }
        let current = FileIdentity(regularFileAt: self.path)
        let rewrite = self.written.map { $0.generation != snapshot.generation || $0.file != current } ?? true
        guard rewrite || lastSync != self.stampedSync else {
            self.succeeded(now: now)
            return
        }
        do {
            if rewrite {
                if self.written != nil, current != self.written?.file {
                    self.logger.warning(
                        "the cutoff cache file was removed or replaced; writing it again",
                        metadata: ["path": "\(self.path)"]
                    )
                }
                // Forget the old file first: should this write fail, the next tick tries again.
                self.written = nil
                try SnapshotCache.write(snapshot, to: self.path)
            }
            try Self.setModificationTime(lastSync, of: self.path)
            if rewrite {
                guard let file = FileIdentity(regularFileAt: self.path) else {
                    throw FileOutputError(path: self.path, reason: "the file disappeared right after it was written")
                }
                self.written = (snapshot.generation, file)
            }
            self.stampedSync = lastSync
            self.succeeded(now: now)
        } catch {
            self.failed(error, now: now)
        }
    }

    private mutating func failed(_ error: any Error, now: NIODeadline) {
        var failing = self.failing ?? (since: now, last: now, attempts: 0, reported: false)
        failing.attempts += 1
        failing.last = now
        defer { self.failing = failing }
        guard let attempts = self.reports.failed(now: now) else { return }
        if failing.reported {
            self.logger.warning(
                "still cannot write the cutoff cache file",
                metadata: [
                    "path": "\(self.path)", "error": "\(error)", "failures": "\(attempts)",
                    "failing_for_s": "\(Self.seconds(now - failing.since))",
                ]
            )
        } else {
            failing.reported = true
            self.logger.warning(
                "cannot write the cutoff cache file; retrying every second, logging at most once a minute",
                metadata: ["path": "\(self.path)", "error": "\(error)", "failures": "\(attempts)"]
            )
        }
    }

    private mutating func succeeded(now: NIODeadline) {
        guard self.reports.succeeded(now: now) != nil, let failing = self.failing else { return }
        self.failing = nil
        self.logger.notice(
            "the cutoff cache file is written again",
            metadata: [
                "path": "\(self.path)", "failures": "\(failing.attempts)",
                "failed_for_s": "\(Self.seconds(failing.last - failing.since))",
            ]
        )
    }

    private static func seconds(_ amount: TimeAmount) -> Int64 {
        amount.nanoseconds / 1_000_000_000
    }

    /// Sets the file's modification time (what a restart judges its age by) to `unixSeconds`, without following
    /// a symbolic link the path may have been replaced by.
    private static func setModificationTime(_ unixSeconds: Int64, of path: String) throws {
        // Access time too (nothing reads it; UTIME_OMIT is a macro Swift does not import).
        let time = timespec(tv_sec: Int(unixSeconds), tv_nsec: 0)
        var times = [time, time]
        guard utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0 else {
            throw FileOutputError(path: path, reason: String(cString: strerror(errno)))
        }
    }
}
