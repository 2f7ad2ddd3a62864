//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateTokens

/// The private keys tokens are minted with: every key of every `--key` JWK Set, used in turn, so one run can
/// mix HS256, EdDSA, ES256 and RS256 tokens.
struct BenchSigners: Sendable {
    let signers: [TokenSigner]

    /// The most keys the bench takes, a bound on its own input.
    static let maxKeys = 64

    init(paths: [String]) throws {
        guard !paths.isEmpty else { throw BenchError("no_key", "give at least one --key PRIVATE_JWKS") }
        var signers: [TokenSigner] = []
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else {
                throw BenchError("key_unreadable", "cannot read the key set \(path) (or it is over 1 MiB)")
            }
            let bytes = Array(data)
            for kid in try Self.keyIDs(data, path: path) {
                do {
                    signers.append(try TokenSigner(privateJWKS: bytes, keyID: kid))
                } catch {
                    throw BenchError("invalid_key", "\(path): \(error)")
                }
            }
        }
        guard signers.count <= Self.maxKeys else {
            throw BenchError("too_many_keys", "at most \(Self.maxKeys) keys")
        }
        self.signers = signers
    }

    /// The algorithms in use, for the report.
    var algorithms: [String] {
        var seen: [String] = []
        for signer in self.signers where !seen.contains(signer.algorithm.rawValue) {
            seen.append(signer.algorithm.rawValue)
        }
        return seen
    }

    func signer(for number: Int) -> TokenSigner {
        self.signers[number % self.signers.count]
    }

    /// The kids of a set with several keys (each needs choosing by kid); `[nil]` for a set of one key.
    private static func keyIDs(_ data: Data, path: String) throws -> [String?] {
        let object = try? JSONSerialization.jsonObject(with: data)
        guard let keys = (object as? [String: Any])?["keys"] as? [[String: Any]], keys.count > 1 else {
            return [nil]
        }
        return try keys.map { key in
            guard let kid = key["kid"] as? String else {
                throw BenchError("missing_kid", "\(path): a set of several keys needs a kid on every key")
            }
            return kid
        }
    }
}
