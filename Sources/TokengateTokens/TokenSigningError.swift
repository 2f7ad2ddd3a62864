//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Minting failed: the claims cannot be put in a token tokengate would accept, or libcrypto failed.
public struct TokenSigningError: Error, CustomStringConvertible, Sendable, Hashable {
    /// `invalid_claims` or `signing_failed`.
    public var code: String
    public var message: String

    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { self.message }
}
