//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A key file or key value that cannot be used, with a message that says which one and why.
///
/// The message names the file, the key's position and its `kid`, never key material.
public struct KeyLoadingError: Error, CustomStringConvertible, Sendable, Hashable {
    /// A stable code: `unreadable_file`, `invalid_json`, `invalid_pem`, `invalid_key`, `unsupported_key`,
    /// `weak_key`, `missing_alg`, `duplicate_kid`, `missing_kid`, `mixed_key_types`, `no_keys`, `no_private_key`,
    /// `private_key` (a fetched set that publishes a private or secret key).
    public var code: String
    /// What is wrong, in words.
    public var message: String
    /// The file the key came from, when it came from a file.
    public var file: String?
    /// The key's position in its JWK Set (0-based).
    public var keyIndex: Int?
    /// The key's `kid`, when it has one.
    public var keyID: String?

    public init(code: String, message: String, file: String? = nil, keyIndex: Int? = nil, keyID: String? = nil) {
        self.code = code
        self.message = message
        self.file = file
        self.keyIndex = keyIndex
        self.keyID = keyID
    }

    public var description: String {
        var location: [String] = []
        if let file = self.file { location.append("key file '\(file)'") }
        if let index = self.keyIndex { location.append("key #\(index)") }
        if let kid = self.keyID { location.append("kid '\(kid)'") }
        return location.isEmpty ? self.message : location.joined(separator: ", ") + ": " + self.message
    }

    /// The same error, located in `file`.
    func inFile(_ file: String) -> KeyLoadingError {
        var copy = self
        copy.file = file
        return copy
    }
}
