//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// A cutoffs file that cannot be used, with a message naming the file and the member at fault.
public struct CutoffFileError: Error, CustomStringConvertible, Sendable, Hashable {
    /// `unreadable_file`, `invalid_json` or `invalid_value`.
    public var code: String
    public var message: String
    public var file: String?

    public init(code: String, message: String, file: String? = nil) {
        self.code = code
        self.message = message
        self.file = file
    }

    public var description: String {
        if let file = self.file { return "cutoffs file '\(file)': \(self.message)" }
        return self.message
    }
}

extension CutoffSnapshot {
    /// Loads `{"global_revoked_before": UNIX, "users": {"USER": {"revoked_before": UNIX,
    /// "api_revoked_before": UNIX}}}` from a file. Every member is optional; unknown members are errors (a
    /// misspelt cutoff must not silently revoke nothing).
    /// - Throws: ``CutoffFileError``.
    public static func load(jsonFile path: String) throws -> CutoffSnapshot {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CutoffFileError(code: "unreadable_file", message: "the file cannot be read", file: path)
        }
        do {
            return try CutoffSnapshot(json: [UInt8](data))
        } catch var error as CutoffFileError {
            error.file = path
            throw error
        }
    }

    /// Parses the cutoffs JSON (see ``load(jsonFile:)``). Times are integral UNIX seconds, 0 through year 9999;
    /// `null` means no cutoff.
    /// - Throws: ``CutoffFileError``.
    public convenience init(json: [UInt8]) throws {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: Data(json))
        } catch {
            throw CutoffFileError(code: "invalid_json", message: "not valid JSON")
        }
        guard let object = root as? [String: Any] else {
            throw CutoffFileError(code: "invalid_json", message: "the top level must be a JSON object")
        }
        for key in object.keys where key != "global_revoked_before" && key != "users" {
            throw CutoffFileError(
                code: "invalid_value",
                message: "unknown member '\(key)' (expected 'global_revoked_before' and 'users')"
            )
        }
        let global = try Self.time(object["global_revoked_before"], at: "global_revoked_before")
        // JSONSerialization hands over a `[String: Any]`, which has already put ids equal under canonical
        // equivalence on one key: this format cannot tell such ids apart (the SQL stores can).
        var users: [CutoffUserKey: UserCutoffs] = [:]
        if let rawUsers = object["users"], !(rawUsers is NSNull) {
            guard let userObjects = rawUsers as? [String: Any] else {
                throw CutoffFileError(code: "invalid_value", message: "'users' must be an object keyed by user id")
            }
            for (user, rawEntry) in userObjects {
                guard let entry = rawEntry as? [String: Any] else {
                    throw CutoffFileError(code: "invalid_value", message: "users['\(user)'] must be an object")
                }
                for key in entry.keys where key != "revoked_before" && key != "api_revoked_before" {
                    throw CutoffFileError(
                        code: "invalid_value",
                        message: "users['\(user)']: unknown member '\(key)' (expected 'revoked_before' and "
                            + "'api_revoked_before')"
                    )
                }
                users[CutoffUserKey(user)] = UserCutoffs(
                    revokedBefore: try Self.time(entry["revoked_before"], at: "users['\(user)'].revoked_before"),
                    apiRevokedBefore: try Self.time(
                        entry["api_revoked_before"],
                        at: "users['\(user)'].api_revoked_before"
                    )
                )
            }
        }
        self.init(globalRevokedBefore: global, users: users)
    }

    private static func time(_ value: Any?, at path: String) throws(CutoffFileError) -> Int64? {
        guard let value, !(value is NSNull) else { return nil }
        let problem = CutoffFileError(
            code: "invalid_value",
            message: "\(path) must be an integer UNIX time (seconds, 0 through year 9999) or null"
        )
        // JSONSerialization returns booleans as NSNumber too; tell them apart by their Objective-C type
        // ("c" or "B" for a boolean, depending on the Foundation implementation).
        guard let number = value as? NSNumber else { throw problem }
        let type = String(cString: number.objCType)
        guard type != "c", type != "B" else { throw problem }
        let double = number.doubleValue
        guard double.isFinite, double == double.rounded(), double >= 0, double <= 253_402_300_799 else {
            throw problem
        }
        return Int64(double)
    }
}

extension CutoffSnapshot {
    /// The snapshot in the cutoffs file format that ``load(jsonFile:)`` reads (for the snapshot cache file
    /// that lets a gateway start while its store is unreachable). Not for the request path.
    public func jsonData() throws -> Data {
        var users: [String: Any] = [:]
        users.reserveCapacity(self.users.count)
        for (user, cutoffs) in self.users {
            var entry: [String: Any] = [:]
            if let revoked = cutoffs.revokedBefore { entry["revoked_before"] = revoked }
            if let apiRevoked = cutoffs.apiRevokedBefore { entry["api_revoked_before"] = apiRevoked }
            users[user.id] = entry
        }
        var root: [String: Any] = ["users": users]
        if let global = self.globalRevokedBefore { root["global_revoked_before"] = global }
        return try JSONSerialization.data(withJSONObject: root, options: [.sortedKeys])
    }
}
