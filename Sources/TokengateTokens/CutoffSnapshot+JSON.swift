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
    /// "api_revoked_before": UNIX}}}` from a file (``CutoffsJSON``). Every member is optional; unknown members are
    /// errors (a misspelt cutoff must not silently revoke nothing).
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

    /// Parses the cutoffs JSON (``CutoffsJSON``); `null` means no cutoff.
    /// - Throws: ``CutoffFileError``.
    public convenience init(json: [UInt8]) throws {
        let contents = try CutoffsJSON.parse(json)
        self.init(globalRevokedBefore: contents.globalRevokedBefore, users: contents.users)
    }
}

extension CutoffSnapshot {
    /// The snapshot in the cutoffs file format that ``load(jsonFile:)`` reads (for the snapshot cache file
    /// that lets a gateway start while its store is unreachable). Not for the request path.
    public func jsonData() throws -> Data {
        Data(CutoffsJSON.write(CutoffsJSON.Contents(globalRevokedBefore: self.globalRevokedBefore, users: self.users)))
    }
}
