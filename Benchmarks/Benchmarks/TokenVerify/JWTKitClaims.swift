//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import JWTKit
import TokengateTokens

/// The claims tokengate reads, as a jwt-kit payload, so that jwt-kit does the same work per token: decode `sub`,
/// `iat` and `api_only`, reject an `iat` more than the clock skew in the future, then (in `passesCutoffs`) the
/// global and per-user cutoff lookup in the same CutoffSnapshot.
struct JWTKitClaims: JWTPayload {
    var sub: SubjectClaim
    var iat: IssuedAtClaim
    var apiOnly: Bool

    enum CodingKeys: String, CodingKey {
        case sub
        case iat
        case apiOnly = "api_only"
    }

    func verify(using algorithm: some JWTAlgorithm) async throws {
        if self.iat.value.timeIntervalSinceNow > 60 {
            throw JWTError.claimVerificationFailure(failedClaim: self.iat, reason: "issued in the future")
        }
    }

    /// The cutoff rules of DESIGN §1: `iat` < a cutoff is rejected, `iat` ≥ it accepted.
    func passesCutoffs(_ snapshot: CutoffSnapshot) -> Bool {
        let issuedAt = Int64(self.iat.value.timeIntervalSince1970)
        if let global = snapshot.globalRevokedBefore, issuedAt < global { return false }
        guard let user = snapshot.users[CutoffUserKey(self.sub.value)] else { return true }
        if let revokedBefore = user.revokedBefore, issuedAt < revokedBefore { return false }
        if self.apiOnly, let apiRevokedBefore = user.apiRevokedBefore, issuedAt < apiRevokedBefore { return false }
        return true
    }
}

extension BenchFixture {
    /// A jwt-kit key collection holding the same public key (or HMAC secret) under the same `kid`.
    func makeJWTKitKeys() async throws -> JWTKeyCollection {
        let keys = JWTKeyCollection()
        let kid = JWKIdentifier(string: self.keyID)
        switch self.algorithm {
        case .hs256:
            await keys.add(hmac: HMACKey(from: Data(try self.bytes(of: "k"))), digestAlgorithm: .sha256, kid: kid)
        case .edDSA:
            await keys.add(eddsa: try EdDSA.PublicKey(x: self.publicMembers["x"] ?? "", curve: .ed25519), kid: kid)
        case .es256:
            let parameters = (x: self.publicMembers["x"] ?? "", y: self.publicMembers["y"] ?? "")
            await keys.add(ecdsa: try ES256PublicKey(parameters: parameters), kid: kid)
        case .rs256, .ps256:
            let key = try Insecure.RSA.PublicKey(modulus: self.publicMembers["n"] ?? "", exponent: self.publicMembers["e"] ?? "")
            if self.algorithm == .rs256 {
                await keys.add(rsa: key, digestAlgorithm: .sha256, kid: kid)
            } else {
                await keys.add(pss: key, digestAlgorithm: .sha256, kid: kid)
            }
        case .hs384, .hs512:
            throw BenchSetupError("no jwt-kit benchmark for \(self.algorithm.rawValue)")
        }
        return keys
    }
}
