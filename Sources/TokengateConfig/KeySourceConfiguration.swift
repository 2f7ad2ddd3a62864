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
    /// A JWK Set fetched over HTTPS and kept current in the background (verification keys only).
    case remote(RemoteKeySetConfiguration)
}


/// A key set fetched over HTTPS (`jwks_url:`, or `discovery:` for one found through the issuer's metadata),
/// with the bounds of its cache.
///
/// Refreshing follows the answer's `Cache-Control: max-age`, kept inside ``cacheMinimum``…``cacheMaximum`` so
/// that a provider can neither make every gateway fetch on every request (`max-age=0`) nor freeze a key set
/// for a year. A token with an unknown `kid` triggers a fetch at most once per ``refetchInterval``: a flood of
/// made-up kids costs the provider one request per interval, not one per token.
public struct RemoteKeySetConfiguration: Sendable, Hashable {
    /// What the URL names.
    public enum Kind: Sendable, Hashable {
        /// A JWK Set document (`jwks_url:`).
        case jwks
        /// An issuer whose metadata (`/.well-known/openid-configuration`, else RFC 8414's
        /// `/.well-known/oauth-authorization-server`) names the JWK Set in `jwks_uri`; its `issuer` must be
        /// exactly this URL.
        case discovery
    }

    public var kind: Kind
    /// An `https://` URL, checked for shape when the configuration loads (never fetched then).
    public var url: String
    /// Trust roots for a private PKI (a PEM bundle or a hashed directory); the system store when `nil`.
    public var caFile: ConfigPath?
    public var cacheMinimum: Duration
    public var cacheMaximum: Duration
    public var refetchInterval: Duration
    /// How long the last good set keeps serving after refreshes start failing; past it the issuer has no
    /// usable keys (`503`).
    public var maxStale: Duration
    /// One fetch's deadline, connect and TLS handshake included.
    public var timeout: Duration
    /// The largest response body accepted.
    public var maxBytes: Int

    public static let defaultMaxBytes = 512 * 1024

    public init(
        kind: Kind,
        url: String,
        caFile: ConfigPath? = nil,
        cacheMinimum: Duration = .seconds(300),
        cacheMaximum: Duration = .seconds(86_400),
        refetchInterval: Duration = .seconds(30),
        maxStale: Duration = .seconds(86_400),
        timeout: Duration = .seconds(10),
        maxBytes: Int = Self.defaultMaxBytes
    ) {
        self.kind = kind
        self.url = url
        self.caFile = caFile
        self.cacheMinimum = cacheMinimum
        self.cacheMaximum = cacheMaximum
        self.refetchInterval = refetchInterval
        self.maxStale = maxStale
        self.timeout = timeout
        self.maxBytes = maxBytes
    }
}
