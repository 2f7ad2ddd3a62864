//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One loaded verification key: its id, the algorithms bound to it and a prepared check per algorithm.
///
/// A final class of constants so that the hot path reads it through one reference (no struct copy with a
/// retain per field).
final class VerificationKey: Sendable {
    let keyID: String?
    /// The UTF-8 bytes of `keyID`, compared against the token's `kid` without building a String.
    let keyIDBytes: [UInt8]
    /// One bit per allowed algorithm (``TokenAlgorithm/bit``).
    let algorithmMask: UInt8
    /// Indexed by ``TokenAlgorithm/index``; non-nil exactly where `algorithmMask` has a bit.
    let checks: [SignatureCheck?]
    let isSymmetric: Bool

    var algorithms: [TokenAlgorithm] {
        TokenAlgorithm.allCases.filter { self.algorithmMask & $0.bit != 0 }
    }

    init(keyID: String?, checks: [(TokenAlgorithm, SignatureCheck)], isSymmetric: Bool) {
        self.keyID = keyID
        self.keyIDBytes = Array((keyID ?? "").utf8)
        var table = [SignatureCheck?](repeating: nil, count: TokenAlgorithm.allCases.count)
        var mask: UInt8 = 0
        for (algorithm, check) in checks {
            table[algorithm.index] = check
            mask |= algorithm.bit
        }
        self.checks = table
        self.algorithmMask = mask
        self.isSymmetric = isSymmetric
    }

    /// Builds the checks for a parsed JWK (public parts only).
    convenience init(jwk: JWK) throws(KeyLoadingError) {
        var checks: [(TokenAlgorithm, SignatureCheck)] = []
        switch jwk.material {
        case .octet(let secret):
            for algorithm in jwk.algorithms {
                guard let check = SignatureCheck(hmacBits: algorithm.hmacBits!, secret: secret) else {
                    throw KeyLoadingError(
                        code: "invalid_key",
                        message: "cannot prepare the HMAC key",
                        keyIndex: jwk.index,
                        keyID: jwk.keyID
                    )
                }
                checks.append((algorithm, check))
            }
        case .okp, .ec, .rsa:
            let pkey = try jwk.makePKey(includePrivate: false)
            checks = try Self.publicKeyChecks(pkey, algorithms: jwk.algorithms, index: jwk.index, keyID: jwk.keyID)
        }
        self.init(keyID: jwk.keyID, checks: checks, isSymmetric: jwk.isSymmetric)
    }

    static func publicKeyChecks(
        _ pkey: PKey,
        algorithms: [TokenAlgorithm],
        index: Int?,
        keyID: String?
    ) throws(KeyLoadingError) -> [(TokenAlgorithm, SignatureCheck)] {
        var checks: [(TokenAlgorithm, SignatureCheck)] = []
        for algorithm in algorithms {
            guard let check = SignatureCheck(publicKey: pkey, algorithm: algorithm) else {
                throw KeyLoadingError(
                    code: "invalid_key",
                    message: "libcrypto cannot use this key with \(algorithm.rawValue)",
                    keyIndex: index,
                    keyID: keyID
                )
            }
            checks.append((algorithm, check))
        }
        return checks
    }
}
