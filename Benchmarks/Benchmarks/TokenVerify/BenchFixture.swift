//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateTokens

/// Everything one algorithm's benchmarks share: a fresh key, one token minted with it, the cutoff snapshot, and
/// the pieces each contender needs (tokengate's verifier, jwt-kit's key material, libcrypto's raw inputs).
///
/// Built once per process when the benchmarks register; nothing here is committed or written to disk.
struct BenchFixture: Sendable {
    /// The user the token is for. 9 bytes: it fits Swift's small-string form, as ordinary user ids do.
    static let subject = "user-4711"
    /// How many users the cutoff snapshot holds (the token's user among them).
    static let userCount = 10_000

    let algorithm: TokenAlgorithm
    let keyID: String
    let token: String
    /// The verification time: a few seconds after `iat`.
    let now: Int64
    let issuedAt: Int64
    let verifier: TokenVerifier
    let cutoffs: CutoffSnapshot
    /// The public JWK's members as base64url strings (`k`, `x`, `y`, `n`, `e`), for jwt-kit.
    let publicMembers: [String: String]
    /// The JWS signing input (`header.payload`) and the decoded signature, for the libcrypto floor.
    let signingInput: [UInt8]
    let signature: [UInt8]

    init(algorithm: TokenAlgorithm) throws {
        self.algorithm = algorithm
        let keyID = "bench-\(algorithm.rawValue.lowercased())"
        self.keyID = keyID
        let generated = try KeyGenerator.generate(algorithm: algorithm, keyID: keyID)
        let wallClock = Int64(Date().timeIntervalSince1970)
        self.issuedAt = wallClock - 5
        self.now = wallClock

        let signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))
        self.token = try signer.mint(TokenClaims(subject: Self.subject, issuedAt: self.issuedAt, apiOnly: true))
        self.verifier = TokenVerifier(keys: try KeySet(jwks: Array(generated.publicJWKS.utf8)))
        self.cutoffs = Self.makeCutoffs(issuedAt: self.issuedAt)
        self.publicMembers = try Self.members(ofOnlyKeyIn: generated.publicJWKS)

        let parts = self.token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = Base64URLDecoding.decode(parts[2]) else {
            throw BenchSetupError("\(algorithm.rawValue): the minted token is not a three-part JWS")
        }
        self.signingInput = Array(self.token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        self.signature = signature
    }

    /// ~10k users, each with both cutoffs; the token's user has cutoffs before `iat`, so the lookup hits and the
    /// token is still accepted (the common case: a user who once changed a password).
    static func makeCutoffs(issuedAt: Int64) -> CutoffSnapshot {
        var users = CutoffUserMap()
        for index in 0..<Self.userCount {
            users[CutoffUserKey("user-\(index)")] = UserCutoffs(
                revokedBefore: issuedAt - 86_400 - Int64(index),
                apiRevokedBefore: issuedAt - 3_600 - Int64(index % 600)
            )
        }
        precondition(users[CutoffUserKey(Self.subject)] != nil, "the token's user must be in the snapshot")
        return CutoffSnapshot(globalRevokedBefore: issuedAt - 30 * 86_400, users: users, generation: 1)
    }

    private static func members(ofOnlyKeyIn jwks: String) throws -> [String: String] {
        let root = try JSONSerialization.jsonObject(with: Data(jwks.utf8))
        guard let keys = (root as? [String: Any])?["keys"] as? [[String: Any]], keys.count == 1 else {
            throw BenchSetupError("KeyGenerator did not return a one-key JWK Set")
        }
        return keys[0].compactMapValues { $0 as? String }
    }

    /// A member as bytes (for the libcrypto floor).
    func bytes(of member: String) throws -> [UInt8] {
        guard let text = self.publicMembers[member], let bytes = Base64URLDecoding.decode(Substring(text)) else {
            throw BenchSetupError("\(self.algorithm.rawValue): the public JWK has no usable '\(member)'")
        }
        return bytes
    }
}

/// A benchmark that cannot be set up honestly (e.g. its token does not verify) stops the run with this.
struct BenchSetupError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// Base64url without padding → bytes, via Foundation (setup only; never measured).
enum Base64URLDecoding {
    static func decode(_ text: Substring) -> [UInt8]? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64).map { [UInt8]($0) }
    }
}
