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
/// or `null`. Anything else (an unknown key, a boolean, a fraction, an invalid user id) is an error that names
/// the file and the key, because a typo that silently dropped a cutoff would let revoked tokens in.
/// The sync service reloads the file when its inode, size or modification time changes. As with every store,
/// a reload only moves cutoffs forward; lowering a time in the file takes effect at the next restart.
/// `JSONSerialization` keeps the last of duplicate keys; the file's author must not repeat a user.
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
            let data = try Self.read(path: path, maxFileBytes: maxFileBytes)
            return try Self.parse(data, fileDescription: "cutoffs file \(path)")
        }
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

    private static func read(path: String, maxFileBytes: Int) throws -> Data {
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw CutoffStoreError(code: .storeUnavailable, message: "cutoffs file \(path): cannot be read")
        }
        if let size = attributes[.size] as? NSNumber, size.int64Value > Int64(maxFileBytes) {
            throw CutoffStoreError(
                code: .invalidStoreFile,
                message: "cutoffs file \(path): larger than the limit of \(maxFileBytes) bytes"
            )
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CutoffStoreError(code: .storeUnavailable, message: "cutoffs file \(path): cannot be read")
        }
        guard data.count <= maxFileBytes else {
            throw CutoffStoreError(
                code: .invalidStoreFile,
                message: "cutoffs file \(path): larger than the limit of \(maxFileBytes) bytes"
            )
        }
        return data
    }

    /// Parses the file format into a table; `fileDescription` starts every error message.
    static func parse(_ data: Data, fileDescription: String) throws -> CutoffTable {
        func invalid(_ message: String) -> CutoffStoreError {
            CutoffStoreError(code: .invalidStoreFile, message: "\(fileDescription): \(message)")
        }
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            let detail = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String
            throw invalid("not valid JSON" + (detail.map { " (\($0))" } ?? ""))
        }
        guard case .object(let object) = JSONScalar(root) else {
            throw invalid("the top level must be a JSON object")
        }

        var table = CutoffTable()
        for key in object.keys.sorted() {
            switch key {
            case "global_revoked_before":
                table.globalRevokedBefore = try Self.time(object[key]!, at: key, invalid: invalid)
            case "users":
                guard case .object(let users) = JSONScalar(object[key]!) else {
                    throw invalid("\"users\" must be an object of user id to cutoffs")
                }
                table.users.reserveCapacity(users.count)
                for (user, value) in users {
                    do {
                        try CutoffUserID.validate(user)
                    } catch let error as CutoffStoreError {
                        throw invalid("a key of \"users\" is not a valid user id: \(error.message)")
                    }
                    // JSONSerialization puts ids equal under Unicode canonical equivalence on one `String` key before
                    // this sees them, so this format cannot tell them apart (the SQL stores can).
                    let cutoffs = try Self.userCutoffs(value, user: user, invalid: invalid)
                    let previous = table.users[CutoffUserKey(user)] ?? UserCutoffs()
                    table.users[CutoffUserKey(user)] = UserCutoffs(
                        revokedBefore: CutoffTable.later(previous.revokedBefore, cutoffs.revokedBefore),
                        apiRevokedBefore: CutoffTable.later(previous.apiRevokedBefore, cutoffs.apiRevokedBefore)
                    )
                }
            default:
                throw invalid("unknown key \(Self.quoted(key)) at the top level "
                    + "(expected \"global_revoked_before\" and \"users\")")
            }
        }
        return table
    }

    private static func userCutoffs(
        _ value: Any,
        user: String,
        invalid: (String) -> CutoffStoreError
    ) throws -> UserCutoffs {
        let location = "users[\(Self.quoted(user))]"
        guard case .object(let fields) = JSONScalar(value) else {
            throw invalid("\(location) must be an object")
        }
        var cutoffs = UserCutoffs()
        for (key, field) in fields {
            switch key {
            case "revoked_before":
                cutoffs.revokedBefore = try Self.time(field, at: "\(location).revoked_before", invalid: invalid)
            case "api_revoked_before":
                cutoffs.apiRevokedBefore = try Self.time(field, at: "\(location).api_revoked_before", invalid: invalid)
            default:
                throw invalid("unknown key \(Self.quoted(key)) in \(location) "
                    + "(expected \"revoked_before\" and \"api_revoked_before\")")
            }
        }
        return cutoffs
    }

    private static func time(_ value: Any, at location: String, invalid: (String) -> CutoffStoreError) throws -> Int64? {
        switch JSONScalar(value) {
        case .null:
            return nil
        case .integer(let seconds) where seconds >= 0:
            return seconds
        case let other:
            throw invalid("\(location) must be a non-negative integer of UNIX seconds or null, not \(other.kindDescription)")
        }
    }

    /// A key for an error message: JSON-quoted, so control characters cannot reach a terminal, and cut short.
    private static func quoted(_ key: String) -> String {
        var text = ""
        JSONWriter.appendString(key.count > 80 ? String(key.prefix(80)) + "…" : key, to: &text)
        return text
    }
}
