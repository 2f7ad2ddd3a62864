//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims
import Foundation

/// Makes new keys as JWK Sets (the CLI's `keygen`).
public enum KeyGenerator {
    /// A new key for `algorithm`.
    ///
    /// Every JWK carries `kty`, `kid`, `alg` and `use: "sig"`. The public set has no private members for
    /// asymmetric keys; an HMAC secret is necessarily in both sets. HMAC secrets are as long as the hash
    /// (32, 48 or 64 bytes from `RAND_bytes`); RSA keys have 2048 bits. Without `keyID` the kid is the RFC 7638
    /// thumbprint for public keys and a random id for HMAC secrets (a thumbprint would be a hash of the secret).
    /// - Throws: ``KeyLoadingError`` when libcrypto cannot make or export the key.
    public static func generate(algorithm: TokenAlgorithm, keyID: String?) throws -> (
        privateJWKS: String, publicJWKS: String
    ) {
        func failure() -> KeyLoadingError {
            KeyLoadingError(code: "keygen_failed", message: "libcrypto could not generate a \(algorithm.rawValue) key")
        }
        var publicMembers: [String: String]
        var privateMembers: [String: String] = [:]
        switch algorithm {
        case .hs256, .hs384, .hs512:
            var secret = [UInt8](repeating: 0, count: algorithm.hmacBits! / 8)
            guard secret.withUnsafeMutableBytes({ CTokengateShims_random($0.baseAddress, $0.count) }) == 1 else {
                throw failure()
            }
            publicMembers = ["kty": "oct", "k": Base64URL.encode(secret)]
            for i in secret.indices { secret[i] = 0 }
        case .edDSA, .es256, .rs256, .ps256:
            guard let pointer = CTokengateShims_keygen(algorithm.shimScheme!) else { throw failure() }
            let pkey = PKey(taking: pointer)
            switch algorithm {
            case .edDSA:
                guard let x = pkey.raw(privatePart: false), let d = pkey.raw(privatePart: true) else { throw failure() }
                publicMembers = ["kty": "OKP", "crv": "Ed25519", "x": Base64URL.encode(x)]
                privateMembers = ["d": Base64URL.encode(d)]
            case .es256:
                guard let x = pkey.bigNumber("qx", padTo: 32), let y = pkey.bigNumber("qy", padTo: 32),
                    let d = pkey.bigNumber("priv", padTo: 32)
                else { throw failure() }
                publicMembers = ["kty": "EC", "crv": "P-256", "x": Base64URL.encode(x), "y": Base64URL.encode(y)]
                privateMembers = ["d": Base64URL.encode(d)]
            default:
                let names = [
                    ("d", "d"), ("p", "rsa-factor1"), ("q", "rsa-factor2"), ("dp", "rsa-exponent1"),
                    ("dq", "rsa-exponent2"), ("qi", "rsa-coefficient1"),
                ]
                guard let n = pkey.bigNumber("n"), let e = pkey.bigNumber("e") else { throw failure() }
                publicMembers = ["kty": "RSA", "n": Base64URL.encode(n), "e": Base64URL.encode(e)]
                for (member, parameter) in names {
                    guard let value = pkey.bigNumber(parameter) else { throw failure() }
                    privateMembers[member] = Base64URL.encode(value)
                }
            }
        }
        let kid: String
        if let keyID {
            kid = keyID
        } else if algorithm.isHMAC {
            var random = [UInt8](repeating: 0, count: 12)
            guard random.withUnsafeMutableBytes({ CTokengateShims_random($0.baseAddress, $0.count) }) == 1 else {
                throw failure()
            }
            kid = Base64URL.encode(random)
        } else {
            kid = Self.thumbprint(publicMembers)
        }
        publicMembers["kid"] = kid
        publicMembers["alg"] = algorithm.rawValue
        publicMembers["use"] = "sig"
        let privateKey = publicMembers.merging(privateMembers) { first, _ in first }
        return (try Self.keySet(privateKey), try Self.keySet(publicMembers))
    }

    /// RFC 7638 thumbprint: SHA-256 of the required members in lexicographic order, base64url.
    static func thumbprint(_ members: [String: String]) -> String {
        let required: [String]
        switch members["kty"] {
        case "OKP": required = ["crv", "kty", "x"]
        case "EC": required = ["crv", "kty", "x", "y"]
        case "RSA": required = ["e", "kty", "n"]
        default: required = ["k", "kty"]
        }
        let canonical = "{" + required.map { "\"\($0)\":\"\(members[$0] ?? "")\"" }.joined(separator: ",") + "}"
        let input = Array(canonical.utf8)
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = input.withUnsafeBytes { i in
            digest.withUnsafeMutableBytes { d in
                EVP_Digest(
                    i.baseAddress,
                    i.count,
                    d.baseAddress?.assumingMemoryBound(to: UInt8.self),
                    &length,
                    EVP_sha256(),
                    nil
                )
            }
        }
        return Base64URL.encode(digest)
    }

    private static func keySet(_ key: [String: String]) throws -> String {
        let data = try JSONSerialization.data(
            withJSONObject: ["keys": [key]],
            options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        )
        return String(decoding: data, as: UTF8.self) + "\n"
    }
}
