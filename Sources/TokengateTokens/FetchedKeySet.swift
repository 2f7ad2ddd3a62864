//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// A JWK Set as an identity provider publishes it, read leniently: the keys tokengate can use, and the ones it
/// skipped with the reason.
///
/// A key file is the operator's own and every key in it must be usable (``KeySet/init(jwks:algorithm:)``). A
/// provider's set is not: real ones list encryption keys (`use: enc`), key types or curves tokengate does not
/// verify with, and RSA keys without `alg`. Refusing the whole set for one of those would lock every user out,
/// so each such key is skipped (and the gateway logs it with its `kid`). Two things still refuse the whole set:
/// a key with private members, or an HMAC secret (`kty: oct`): a provider that publishes either has leaked a
/// signing key, and verifying with the set would trust whoever read it.
public struct FetchedKeySet: Sendable {
    /// One key left out, with why; never key material.
    public struct SkippedKey: Sendable, Hashable {
        public var index: Int
        public var keyID: String?
        public var reason: String
    }

    /// The usable keys; `nil` when none is.
    public let keys: KeySet?
    public let skipped: [SkippedKey]

    /// - Parameters:
    ///   - jwks: the document (`{"keys": [...]}`).
    ///   - algorithm: the configuration entry's `alg`: binds keys without their own `alg` whose type it fits.
    ///   - allowed: the issuer's algorithms (`tokens.algorithms`): a key without `alg` whose type serves several
    ///     algorithms (RSA: RS256 and PS256) is bound to the one of them this list holds, and skipped when the list
    ///     holds both or neither — the token's header never picks the algorithm.
    /// - Throws: ``KeyLoadingError`` for a document that is not a JWK Set, or that holds a private or secret key.
    public init(jwks: some Collection<UInt8>, algorithm: TokenAlgorithm?, allowed: [TokenAlgorithm]) throws {
        let objects = try KeySet.parseKeyObjects(Data(jwks))
        guard objects.count <= 100 else {
            throw KeyLoadingError(code: "invalid_json", message: "the key set holds \(objects.count) keys; at most 100 are read")
        }
        for (index, object) in objects.enumerated() {
            guard let key = object as? [String: Any] else { continue }
            let kid = key["kid"] as? String
            if key["kty"] as? String == "oct" {
                throw KeyLoadingError(
                    code: "private_key",
                    message: "the key set publishes an HMAC secret (kty oct): refused whole",
                    keyIndex: index,
                    keyID: kid
                )
            }
            if ["d", "p", "q", "dp", "dq", "qi"].contains(where: { key[$0] != nil }) {
                throw KeyLoadingError(
                    code: "private_key",
                    message: "the key set publishes private key members: refused whole",
                    keyIndex: index,
                    keyID: kid
                )
            }
        }
        var usable: [VerificationKey] = []
        var skipped: [SkippedKey] = []
        var seen = Set<String>()
        for (index, object) in objects.enumerated() {
            let dict = object as? [String: Any]
            let kid = dict?["kid"] as? String
            let fallback = dict.flatMap { Self.fallbackAlgorithm(for: $0, algorithm: algorithm, allowed: allowed) }
            do {
                let jwk = try JWK(object, index: index, operation: "verify", fallbackAlgorithm: fallback)
                let key = try VerificationKey(jwk: jwk)
                if let kid {
                    guard seen.insert(kid).inserted else {
                        skipped.append(SkippedKey(index: index, keyID: kid, reason: "another key has the same kid"))
                        continue
                    }
                }
                usable.append(key)
            } catch {
                skipped.append(SkippedKey(index: index, keyID: kid, reason: error.message))
            }
        }
        if usable.count > 1 {
            // With several keys a token's kid picks one; a key without a kid could never be picked.
            for (position, key) in usable.enumerated().reversed() where key.keyID == nil {
                skipped.append(SkippedKey(index: position, keyID: nil, reason: "a key set with several keys needs a kid on each"))
                usable.remove(at: position)
            }
        }
        self.keys = usable.isEmpty ? nil : try KeySet(validating: usable)
        self.skipped = skipped.sorted { $0.index < $1.index }
    }

    /// The algorithm a key without `alg` is bound to: the entry's `alg` when it fits the key's type, else the one
    /// algorithm of the type that `allowed` holds; `nil` (no binding) otherwise.
    static func fallbackAlgorithm(
        for key: [String: Any],
        algorithm: TokenAlgorithm?,
        allowed: [TokenAlgorithm]
    ) -> TokenAlgorithm? {
        guard key["alg"] == nil else { return nil }
        let candidates: [TokenAlgorithm]
        switch key["kty"] as? String {
        case "RSA": candidates = [.rs256, .ps256]
        case "EC": candidates = [.es256]
        case "OKP": candidates = [.edDSA]
        default: return nil
        }
        if let algorithm, candidates.contains(algorithm) { return algorithm }
        let fitting = candidates.filter(allowed.contains)
        return fitting.count == 1 ? fitting[0] : nil
    }
}
