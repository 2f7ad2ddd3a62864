//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// The keys a verifier trusts: loaded once, immutable, shared by every request.
///
/// A set may hold several keys so that keys rotate without downtime; each then needs a distinct `kid`.
/// With exactly one key a token may omit `kid`. A set never mixes HMAC secrets with public keys (the
/// Wycheproof "MixedKeySet" rule: a secret and a public key side by side invite key confusion and
/// usually mean a mistake in the file).
public final class KeySet: Sendable {
    let keys: [VerificationKey]

    /// How many keys the set holds.
    public var count: Int { self.keys.count }
    /// The `kid` of each key, in order.
    public var keyIDs: [String?] { self.keys.map(\.keyID) }
    /// The algorithms each key allows, in order.
    public var algorithms: [[TokenAlgorithm]] { self.keys.map(\.algorithms) }

    init(validating keys: [VerificationKey]) throws(KeyLoadingError) {
        guard !keys.isEmpty else {
            throw KeyLoadingError(code: "no_keys", message: "the key set holds no keys")
        }
        if keys.count > 1 {
            var seen = Set<String>()
            for (index, key) in keys.enumerated() {
                guard let kid = key.keyID else {
                    throw KeyLoadingError(
                        code: "missing_kid",
                        message: "a key set with several keys needs a distinct 'kid' on every key",
                        keyIndex: index
                    )
                }
                guard seen.insert(kid).inserted else {
                    throw KeyLoadingError(
                        code: "duplicate_kid",
                        message: "two keys share this 'kid'",
                        keyIndex: index,
                        keyID: kid
                    )
                }
            }
            if keys.contains(where: \.isSymmetric) && keys.contains(where: { !$0.isSymmetric }) {
                throw KeyLoadingError(
                    code: "mixed_key_types",
                    message: "a key set must not mix HMAC secrets with public keys"
                )
            }
        }
        self.keys = keys
    }

    /// Loads a JWK Set (`{"keys": [...]}`) or a single JWK object.
    ///
    /// Every key must be usable: an unsupported type, curve or algorithm, an encryption key (`use` other
    /// than `sig`, `key_ops` without `verify`), an RSA key under 2048 bits or with the ROCA structure, an
    /// HMAC secret shorter than its hash, or a point not on its curve fails the whole set with an error
    /// naming the key. Private members are ignored: only public parts are used for verification.
    ///
    /// Each key is bound to one algorithm: its `alg`, else `algorithm`. An `oct` or `RSA` key with neither is
    /// refused (`missing_alg`), since its type serves several; Ed25519 and P-256 keys need neither.
    /// - Parameter algorithm: the algorithm for keys without their own `alg` (a configuration `keys` entry's
    ///   `alg`); it must fit each such key's type.
    /// - Throws: ``KeyLoadingError``.
    public convenience init(jwks: some Collection<UInt8>, algorithm: TokenAlgorithm? = nil) throws {
        let objects = try Self.parseKeyObjects(Data(jwks))
        var keys: [VerificationKey] = []
        for (index, object) in objects.enumerated() {
            let jwk = try JWK(object, index: index, operation: "verify", fallbackAlgorithm: algorithm)
            keys.append(try VerificationKey(jwk: jwk))
        }
        try self.init(validating: keys)
    }

    /// One HMAC secret given as raw bytes (from a secret file or an environment variable), bound to
    /// `algorithm`. The secret must be at least as long as the hash output (RFC 7518 §3.2).
    /// - Throws: ``KeyLoadingError``.
    public convenience init(hmacSecret: [UInt8], algorithm: TokenAlgorithm, keyID: String? = nil) throws {
        guard let bits = algorithm.hmacBits else {
            throw KeyLoadingError(code: "unsupported_key", message: "\(algorithm.rawValue) is not an HMAC algorithm")
        }
        guard hmacSecret.count * 8 >= bits else {
            throw KeyLoadingError(
                code: "weak_key",
                message: "the HMAC secret has \(hmacSecret.count) bytes; at least \(bits / 8) are required"
            )
        }
        guard let check = SignatureCheck(hmacBits: bits, secret: hmacSecret) else {
            throw KeyLoadingError(code: "invalid_key", message: "cannot prepare the HMAC key")
        }
        try self.init(validating: [VerificationKey(keyID: keyID, checks: [(algorithm, check)], isSymmetric: true)])
    }

    /// The keys of a JWK Set (or single JWK) document that carry private members, described by position and
    /// `kid` (`key 0 (kid "a")`); empty when there are none or the document does not parse (loading reports
    /// that).
    ///
    /// Loading a verification set ignores private members, so a private set listed under `keys:` works — and
    /// silently copies the signing key to wherever the verification keys are deployed, which is usually more
    /// places, less guarded. This lets the gateway say so. Only asymmetric private parts count (`d`, and RSA's
    /// CRT members); an HMAC key's `k` is the secret that verifies and cannot be left out.
    public static func keysWithPrivateMembers(jwks: some Collection<UInt8>) -> [String] {
        guard let objects = try? Self.parseKeyObjects(Data(jwks)) else { return [] }
        var found: [String] = []
        for (index, object) in objects.enumerated() {
            guard let key = object as? [String: Any] else { continue }
            guard ["d", "p", "q", "dp", "dq", "qi"].contains(where: { key[$0] != nil }) else { continue }
            if let kid = key["kid"] as? String {
                found.append("key \(index) (kid \"\(kid)\")")
            } else {
                found.append("key \(index)")
            }
        }
        return found
    }

    /// Whether a JWK Set (or one JWK) holds an HMAC key (`kty: oct`): such a set is a secret wherever it is, since
    /// the key that verifies also signs. `false` for a document that does not parse (loading says why).
    public static func holdsSymmetricKeys(jwks: some Collection<UInt8>) -> Bool {
        guard let objects = try? Self.parseKeyObjects(Data(jwks)) else { return false }
        return objects.contains { ($0 as? [String: Any])?["kty"] as? String == "oct" }
    }

    /// The key objects of a JWK Set or single-JWK document.
    static func parseKeyObjects(_ data: Data) throws(KeyLoadingError) -> [Any] {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw KeyLoadingError(code: "invalid_json", message: "the key set is not valid JSON")
        }
        guard let object = root as? [String: Any] else {
            throw KeyLoadingError(code: "invalid_json", message: "a JWK Set must be a JSON object")
        }
        if let keys = object["keys"] {
            guard let list = keys as? [Any] else {
                throw KeyLoadingError(code: "invalid_json", message: "'keys' must be an array")
            }
            return list
        }
        if object["kty"] != nil {
            return [object]
        }
        throw KeyLoadingError(code: "invalid_json", message: "expected a JWK Set ({\"keys\": [...]}) or one JWK")
    }

    /// Loads one PEM public key (SubjectPublicKeyInfo, `-----BEGIN PUBLIC KEY-----`): RSA (2048–8192 bits),
    /// EC P-256 or Ed25519.
    /// - Parameters:
    ///   - algorithm: binds the key to one algorithm; required for RSA (RS256 or PS256), optional for the key
    ///     types that serve one (P-256: ES256; Ed25519: EdDSA).
    ///   - keyID: the `kid` tokens must carry to select this key (optional for a one-key set).
    /// - Throws: ``KeyLoadingError``.
    public convenience init(pem: String, algorithm: TokenAlgorithm? = nil, keyID: String? = nil) throws {
        let key = try Self.pemKey(pem, algorithm: algorithm, keyID: keyID)
        try self.init(validating: [key])
    }

    static func pemKey(_ pem: String, algorithm: TokenAlgorithm?, keyID: String?) throws(KeyLoadingError)
        -> VerificationKey
    {
        func fail(_ code: String, _ message: String) -> KeyLoadingError {
            KeyLoadingError(code: code, message: message, keyID: keyID)
        }
        guard pem.contains("-----BEGIN PUBLIC KEY-----") else {
            throw fail(
                "invalid_pem",
                "expected a PEM public key ('-----BEGIN PUBLIC KEY-----'); private keys "
                    + "and certificates are not accepted here"
            )
        }
        guard let pkey = PEMReader.publicKey(pem) else {
            throw fail("invalid_pem", "the PEM public key cannot be decoded")
        }
        let (kind, bits, passesCheck) = pkey.describe()
        let candidates: [TokenAlgorithm]
        switch kind {
        case 1:  // RSA
            guard JWK.rsaBits.contains(Int(bits)) else {
                throw fail(
                    bits < JWK.rsaBits.lowerBound ? "weak_key" : "unsupported_key",
                    "the RSA modulus has \(bits) bits; "
                        + "\(JWK.rsaBits.lowerBound)–\(JWK.rsaBits.upperBound) are accepted"
                )
            }
            if let n = pkey.bigNumber("n"), RSAFingerprint.hasROCAStructure(modulus: n) {
                throw fail("weak_key", "the RSA modulus has the ROCA structure (CVE-2017-15361); replace this key")
            }
            candidates = [.rs256, .ps256]
        case 2:  // EC P-256
            candidates = [.es256]
        case 3:  // Ed25519
            candidates = [.edDSA]
        case 4:
            throw fail("unsupported_key", "the EC key uses an unsupported curve (only P-256)")
        default:
            throw fail("unsupported_key", "unsupported public key type (RSA, EC P-256 and Ed25519 are supported)")
        }
        guard passesCheck else {
            throw fail("invalid_key", "libcrypto rejected the public key")
        }
        var algorithms = candidates
        if let algorithm {
            guard candidates.contains(algorithm) else {
                throw fail("unsupported_key", "algorithm \(algorithm.rawValue) does not fit this key type")
            }
            algorithms = [algorithm]
        } else if candidates.count > 1 {
            // As for a JWK without `alg`: a key is bound to one algorithm, never to what a token's header picks.
            throw fail(
                "missing_alg",
                "an RSA key serves \(candidates.map(\.rawValue).joined(separator: " and ")): name the one it is for "
                    + "(alg: in the configuration, --alg for token verify)"
            )
        }
        let checks = try VerificationKey.publicKeyChecks(pkey, algorithms: algorithms, index: nil, keyID: keyID)
        return VerificationKey(keyID: keyID, checks: checks, isSymmetric: false)
    }

    /// Loads a key file: a JWK Set / JWK (JSON) or a PEM public key, told apart by content.
    /// - Parameter algorithm: binds keys that carry no `alg` of their own (see ``init(jwks:algorithm:)`` and
    ///   ``init(pem:algorithm:keyID:)``).
    /// - Throws: ``KeyLoadingError`` naming `path`.
    public static func load(path: String, algorithm: TokenAlgorithm? = nil) throws -> KeySet {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw KeyLoadingError(code: "unreadable_file", message: "the file cannot be read", file: path)
        }
        guard data.count <= 1 << 20 else {
            throw KeyLoadingError(code: "invalid_key", message: "the file is larger than 1 MiB", file: path)
        }
        let firstByte = data.first(where: { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) })
        do {
            if firstByte == UInt8(ascii: "{") {
                return try KeySet(jwks: data, algorithm: algorithm)
            }
            guard let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") else {
                throw KeyLoadingError(
                    code: "invalid_key",
                    message: "the file is neither a JWK Set (JSON) nor a PEM key"
                )
            }
            return try KeySet(pem: text, algorithm: algorithm)
        } catch let error as KeyLoadingError {
            throw error.inFile(path)
        }
    }

    /// A set holding the keys of both sets (for several key files), validated as one set.
    /// - Throws: ``KeyLoadingError`` for duplicate or missing `kid`s and mixed key types.
    public func merging(_ other: KeySet) throws -> KeySet {
        try KeySet(validating: self.keys + other.keys)
    }

    /// The index of the key a token's `kid` selects.
    ///
    /// With one key: a token without `kid` selects it; a token with a `kid` selects it when the key has the
    /// same `kid` or none at all (a PEM key loaded without an id). With several keys the `kid` must match.
    @inline(__always)
    func keyIndex(for kid: UnsafeRawBufferPointer?) -> Int? {
        if self.keys.count == 1 {
            guard let kid else { return 0 }
            let key = self.keys[0]
            if key.keyID == nil { return 0 }
            return Self.equal(kid, key.keyIDBytes) ? 0 : nil
        }
        guard let kid else { return nil }
        for index in self.keys.indices where Self.equal(kid, self.keys[index].keyIDBytes) {
            return index
        }
        return nil
    }

    @inline(__always)
    private static func equal(_ bytes: UnsafeRawBufferPointer, _ array: [UInt8]) -> Bool {
        guard bytes.count == array.count else { return false }
        return array.withUnsafeBytes { other in
            bytes.count == 0 || memcmp(bytes.baseAddress!, other.baseAddress!, bytes.count) == 0
        }
    }
}
