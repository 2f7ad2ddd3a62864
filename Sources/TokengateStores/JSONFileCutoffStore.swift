//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOPosix
import TokengateTokens

/// A read-only cutoff store in a JSON file, for deployments that manage cutoffs with their own tooling:
///
/// ```json
/// {"global_revoked_before": 1714564800,
///  "users": {"alice": {"revoked_before": 1714564800, "api_revoked_before": 1714568400}}}
/// ```
///
/// Both top-level keys and both per-user keys are optional; a time is a non-negative integer of UNIX seconds
/// or `null`. Anything else (an unknown key, a boolean, a fraction, an invalid user id, a user named twice) is an
/// error that names the file and the key, because a typo that silently dropped a cutoff would let revoked tokens
/// in (``CutoffsJSON``).
/// The sync service reloads the file when its inode, size or modification time changes. As with every store,
/// a reload only moves cutoffs forward; lowering a time in the file takes effect at the next restart.
public struct JSONFileCutoffStore: CutoffStore {
    /// The file's path.
    public let path: String
    /// Files larger than this are refused rather than read into memory.
    public let maxFileBytes: Int

    public init(path: String, maxFileBytes: Int = 1 << 30) {
        self.path = path
        self.maxFileBytes = maxFileBytes
    }

    public var storeDescription: String {
        "json file \(self.path)"
    }

    public func load() async throws -> CutoffTable {
        let path = self.path
        let maxFileBytes = self.maxFileBytes
        // Reading and parsing a large file blocks; keep it off the Swift-concurrency threads.
        return try await NIOThreadPool.singleton.runIfActive {
            try Self.table(path: path, maxFileBytes: maxFileBytes)
        }
    }

    /// Reads and parses the file at `path` now, as ``load()`` does: `check-config` refuses what `serve` would.
    /// - Throws: ``CutoffStoreError``.
    public static func check(path: String, maxFileBytes: Int = 1 << 30) throws {
        _ = try Self.table(path: path, maxFileBytes: maxFileBytes)
    }

    /// The table in the file at `path`: what ``load()`` reads (off the concurrency threads) and
    /// ``check(path:maxFileBytes:)`` reads.
    private static func table(path: String, maxFileBytes: Int) throws -> CutoffTable {
        try Self.parse(Self.read(path: path, maxFileBytes: maxFileBytes), fileDescription: "cutoffs file \(path)")
    }

    public func changeMarker() async throws -> String? {
        var info = stat()
        guard stat(self.path, &info) == 0 else {
            throw CutoffStoreError(code: .storeUnavailable, message: "cutoffs file \(self.path): cannot be read")
        }
        return "\(info.st_dev):\(info.st_ino):\(info.st_size):\(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec)"
    }

    public func lookup(user: String) async throws -> CutoffLookup {
        let table = try await self.load()
        return CutoffLookup(user: table.users[CutoffUserKey(user)] ?? UserCutoffs(), globalRevokedBefore: table.globalRevokedBefore)
    }

    public func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult {
        throw CutoffStoreError(
            code: .readOnlyStore,
            message: "cutoffs file \(self.path) is read-only; change it with your own tooling or use the SQLite store"
        )
    }

    public func close() async throws {}

    /// The file's bytes. Its size is checked before it is read (a huge file is not read into memory) and again
    /// after (it may have grown in between).
    private static func read(path: String, maxFileBytes: Int) throws -> Data {
        func unreadable() -> CutoffStoreError {
            CutoffStoreError(code: .storeUnavailable, message: "cutoffs file \(path): cannot be read")
        }
        func tooLarge() -> CutoffStoreError {
            CutoffStoreError(code: .invalidStoreFile, message: "cutoffs file \(path): larger than the limit of \(maxFileBytes) bytes")
        }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { throw unreadable() }
        if let size = attributes[.size] as? NSNumber, size.int64Value > Int64(maxFileBytes) { throw tooLarge() }
        guard let data = FileManager.default.contents(atPath: path) else { throw unreadable() }
        guard data.count <= maxFileBytes else { throw tooLarge() }
        return data
    }

    /// Parses the file format (``CutoffsJSON``, which keeps every user id's bytes) into a table;
    /// `fileDescription` starts every error message.
    static func parse(_ data: Data, fileDescription: String) throws -> CutoffTable {
        let contents: CutoffsJSON.Contents
        do {
            contents = try CutoffsJSON.parse([UInt8](data))
        } catch {
            throw CutoffStoreError(code: .invalidStoreFile, message: "\(fileDescription): \(error.message)")
        }
        var table = CutoffTable()
        table.globalRevokedBefore = contents.globalRevokedBefore
        table.users = contents.users
        return table
    }
}
