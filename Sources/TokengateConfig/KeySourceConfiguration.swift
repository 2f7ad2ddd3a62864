//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// One source of verification keys.
///
/// The algorithm is bound to the key (DESIGN §1): a PEM key or an HMAC secret must say which algorithm it is
/// for, and a JWK Set's keys carry their own `alg` (``algorithm`` then only fills in for JWKs that lack one).
public struct KeySourceConfiguration: Sendable, Equatable {
    public var source: KeyMaterialSource
    public var algorithm: TokenAlgorithm?
    /// The `kid` tokens signed with this key carry. For a JWK Set the kids come from the set.
    public var keyID: String?

    public init(source: KeyMaterialSource, algorithm: TokenAlgorithm? = nil, keyID: String? = nil) {
        self.source = source
        self.algorithm = algorithm
        self.keyID = keyID
    }
}

/// The key used to mint tokens (token page routes, `tokengate token mint`). Same shapes as a verification key,
/// but the file holds a private key. Never exposed, never logged.
public struct SigningKeyConfiguration: Sendable, Equatable {
    public var source: KeyMaterialSource
    public var algorithm: TokenAlgorithm?
    /// Which key of a JWK Set to sign with (required when the set holds several), and the `kid` put in tokens.
    public var keyID: String?

    public init(source: KeyMaterialSource, algorithm: TokenAlgorithm? = nil, keyID: String? = nil) {
        self.source = source
        self.algorithm = algorithm
        self.keyID = keyID
    }
}

/// Where key material lives. Files are checked for existence at load; reading and parsing them is the gateway's
/// job, so no key material ever passes through the configuration module.
public enum KeyMaterialSource: Sendable, Equatable {
    /// A JWK Set file (RFC 7517).
    case jwks(ConfigPath)
    /// A PEM file: a public key for verification, a private key for signing.
    case pem(ConfigPath)
    /// A file holding an HMAC secret (raw bytes; trailing newline stripped by the reader).
    case hmacFile(ConfigPath)
    /// The name of an environment variable holding an HMAC secret.
    case hmacEnvironment(String)
}

