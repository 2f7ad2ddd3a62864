//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims
import Foundation

/// One JSON Web Key (RFC 7517, RFC 7518 §6, RFC 8037 §2) as tokengate accepts it, parsed and validated
/// at load time. Nothing here runs on the request path.
struct JWK {
    enum Material {
        case octet(secret: [UInt8])
        case okp(x: [UInt8], d: [UInt8]?)
        case ec(x: [UInt8], y: [UInt8], d: [UInt8]?)
        case rsa(n: [UInt8], e: [UInt8], privateParts: [[UInt8]]?)  // d, p, q, dp, dq, qi
    }

    var index: Int
    var keyID: String?
    /// The algorithms this key may be used with: its `alg` (or the fallback), or every algorithm its type
    /// allows (for verification only when that is exactly one; see ``init(_:index:operation:fallbackAlgorithm:)``).
    var algorithms: [TokenAlgorithm]
    var declaredAlgorithm: TokenAlgorithm?
    var material: Material

    var isSymmetric: Bool {
        if case .octet = self.material { return true }
        return false
    }

    var hasPrivatePart: Bool {
        switch self.material {
        case .octet: return true
        case .okp(_, let d): return d != nil
        case .ec(_, _, let d): return d != nil
        case .rsa(_, _, let p): return p != nil
        }
    }

    /// Minimum and maximum RSA modulus sizes. 2048 is the floor RFC 7518 §3.3 sets; the ceiling bounds the
    /// work one forged token can cost.
    static let rsaBits = 2048...8192

    /// Parses and validates one key object. `operation` is `"verify"` or `"sign"`: a `key_ops` member must
    /// include it.
    ///
    /// The algorithm is bound to the key (DESIGN §1): it is the JWK's own `alg`, else `fallbackAlgorithm` (the
    /// `alg` of the configuration's `keys` entry). For verification, a key with neither whose type serves more
    /// than one algorithm (`oct`: HS256/384/512; `RSA`: RS256 and PS256) is refused (`missing_alg`): accepting
    /// every algorithm of its type would let a token's header pick the algorithm. Ed25519 (EdDSA) and P-256
    /// (ES256) keys serve one algorithm and need no `alg`.
    init(_ object: Any, index: Int, operation: String, fallbackAlgorithm: TokenAlgorithm? = nil)
        throws(KeyLoadingError)
    {
        guard let dict = object as? [String: Any] else {
            throw KeyLoadingError(code: "invalid_key", message: "a key must be a JSON object", keyIndex: index)
        }
        self.index = index
        let kid: String?
        if let rawKid = dict["kid"] {
            guard let s = rawKid as? String else {
                throw KeyLoadingError(code: "invalid_key", message: "'kid' must be a string", keyIndex: index)
            }
            kid = s
        } else {
            kid = nil
        }
        self.keyID = kid
        func fail(_ code: String, _ message: String) -> KeyLoadingError {
            KeyLoadingError(code: code, message: message, keyIndex: index, keyID: kid)
        }
        func string(_ name: String) throws(KeyLoadingError) -> String? {
            guard let value = dict[name] else { return nil }
            guard let s = value as? String else { throw fail("invalid_key", "'\(name)' must be a string") }
            return s
        }
        func bytes(_ name: String) throws(KeyLoadingError) -> [UInt8]? {
            guard let s = try string(name) else { return nil }
            guard let b = Base64URL.decode(s) else {
                throw fail("invalid_key", "'\(name)' is not unpadded base64url")
            }
            return b
        }
        func required(_ name: String) throws(KeyLoadingError) -> [UInt8] {
            guard let b = try bytes(name) else { throw fail("invalid_key", "the '\(name)' member is missing") }
            return b
        }

        guard let kty = try string("kty") else { throw fail("invalid_key", "the 'kty' member is missing") }
        if let use = try string("use"), use != "sig" {
            throw fail("unsupported_key", "'use' is '\(use)'; only signature keys ('sig') can be used")
        }
        if let ops = dict["key_ops"] {
            guard let list = ops as? [Any], list.allSatisfy({ $0 is String }) else {
                throw fail("invalid_key", "'key_ops' must be an array of strings")
            }
            guard list.contains(where: { ($0 as? String) == operation }) else {
                throw fail("unsupported_key", "'key_ops' does not include '\(operation)'")
            }
        }
        var declared: TokenAlgorithm?
        if let alg = try string("alg") {
            guard let algorithm = TokenAlgorithm(rawValue: alg) else {
                throw fail(
                    "unsupported_key",
                    "algorithm '\(alg)' is not supported (supported: "
                        + TokenAlgorithm.allCases.map(\.rawValue).joined(separator: ", ") + ")"
                )
            }
            declared = algorithm
        } else {
            declared = fallbackAlgorithm
        }
        self.declaredAlgorithm = declared

        let declaredBy = dict["alg"] == nil ? " (the alg of its keys entry)" : ""
        /// Every algorithm the key's type serves, whether or not `alg` narrows it.
        var typeAlgorithms: [TokenAlgorithm] = []
        func allowed(_ candidates: [TokenAlgorithm]) throws(KeyLoadingError) -> [TokenAlgorithm] {
            typeAlgorithms = candidates
            guard let declared else { return candidates }
            guard candidates.contains(declared) else {
                throw fail(
                    "unsupported_key",
                    "algorithm '\(declared.rawValue)'\(declaredBy) does not fit a key of type '\(kty)'"
                )
            }
            return [declared]
        }

        switch kty {
        case "oct":
            let secret = try required("k")
            // RFC 7518 §3.2: the key must be at least as long as the hash output.
            let fitting = try allowed([.hs256, .hs384, .hs512])
            let usable = fitting.filter { secret.count * 8 >= $0.hmacBits! }
            guard !usable.isEmpty else {
                let need = (declared?.hmacBits ?? 256) / 8
                throw fail("weak_key", "the HMAC secret has \(secret.count) bytes; at least \(need) are required")
            }
            self.algorithms = usable
            self.material = .octet(secret: secret)
        case "OKP":
            guard let crv = try string("crv") else { throw fail("invalid_key", "the 'crv' member is missing") }
            guard crv == "Ed25519" else {
                throw fail("unsupported_key", "curve '\(crv)' is not supported for OKP keys (only Ed25519)")
            }
            let x = try required("x")
            let d = try bytes("d")
            guard x.count == 32, d == nil || d!.count == 32 else {
                throw fail("invalid_key", "an Ed25519 key has 32-byte 'x' and 'd' members")
            }
            self.algorithms = try allowed([.edDSA])
            self.material = .okp(x: x, d: d)
        case "EC":
            guard let crv = try string("crv") else { throw fail("invalid_key", "the 'crv' member is missing") }
            guard crv == "P-256" else {
                throw fail("unsupported_key", "curve '\(crv)' is not supported for EC keys (only P-256)")
            }
            let x = try required("x")
            let y = try required("y")
            let d = try bytes("d")
            guard x.count == 32, y.count == 32, d == nil || d!.count == 32 else {
                throw fail("invalid_key", "a P-256 key has 32-byte 'x', 'y' and 'd' members")
            }
            self.algorithms = try allowed([.es256])
            self.material = .ec(x: x, y: y, d: d)
        case "RSA":
            let n = try required("n")
            let e = try required("e")
            var privateParts: [[UInt8]]?
            if dict["d"] != nil {
                var parts: [[UInt8]] = []
                for name in ["d", "p", "q", "dp", "dq", "qi"] {
                    parts.append(try required(name))
                }
                privateParts = parts
            }
            let bits = Self.bitLength(n)
            guard Self.rsaBits.contains(bits) else {
                throw fail(
                    bits < Self.rsaBits.lowerBound ? "weak_key" : "unsupported_key",
                    "the RSA modulus has \(bits) bits; "
                        + "\(Self.rsaBits.lowerBound)–\(Self.rsaBits.upperBound) are accepted"
                )
            }
            if RSAFingerprint.hasROCAStructure(modulus: n) {
                throw fail("weak_key", "the RSA modulus has the ROCA structure (CVE-2017-15361); replace this key")
            }
            self.algorithms = try allowed([.rs256, .ps256])
            self.material = .rsa(n: n, e: e, privateParts: privateParts)
        default:
            throw fail("unsupported_key", "key type '\(kty)' is not supported (supported: oct, OKP, EC, RSA)")
        }
        // Checked last, so that a key that is unusable anyway (too short, wrong curve) says so first.
        if operation == "verify", declared == nil, typeAlgorithms.count > 1 {
            throw fail(
                "missing_alg",
                "a key of type '\(kty)' serves several algorithms ("
                    + typeAlgorithms.map(\.rawValue).joined(separator: ", ")
                    + ") and this one has no 'alg': set 'alg' on the JWK, or 'alg' on its keys entry in the "
                    + "configuration"
            )
        }
    }

    static func bitLength(_ bigEndian: [UInt8]) -> Int {
        guard let first = bigEndian.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bigEndian.count - first) * 8 - bigEndian[first].leadingZeroBitCount
    }

    /// Builds the libcrypto key (public part only when `includePrivate` is false). The library's own checks
    /// run here: the point is on the curve, the RSA exponent is sane, a private part matches its public part.
    func makePKey(includePrivate: Bool) throws(KeyLoadingError) -> PKey {
        let pointer: OpaquePointer?
        switch self.material {
        case .octet:
            preconditionFailure("an HMAC secret has no libcrypto key object")
        case .okp(let x, let d):
            pointer = x.withUnsafeBytes { xb in
                if includePrivate, let d {
                    return d.withUnsafeBytes { db in CTokengateShims_pkey_ed25519(xb.baseAddress, db.baseAddress) }
                }
                return CTokengateShims_pkey_ed25519(xb.baseAddress, nil)
            }
        case .ec(let x, let y, let d):
            pointer = x.withUnsafeBytes { xb in
                y.withUnsafeBytes { yb in
                    if includePrivate, let d {
                        return d.withUnsafeBytes { db in
                            CTokengateShims_pkey_ec_p256(xb.baseAddress, yb.baseAddress, db.baseAddress)
                        }
                    }
                    return CTokengateShims_pkey_ec_p256(xb.baseAddress, yb.baseAddress, nil)
                }
            }
        case .rsa(let n, let e, let privateParts):
            let parts = includePrivate ? privateParts : nil
            pointer = Self.makeRSA(n: n, e: e, privateParts: parts)
        }
        guard let pointer else {
            throw KeyLoadingError(
                code: "invalid_key",
                message: includePrivate
                    ? "libcrypto rejected the key (invalid values, or the private part does not match the public part)"
                    : "libcrypto rejected the public key (invalid point, modulus or exponent)",
                keyIndex: self.index,
                keyID: self.keyID
            )
        }
        return PKey(taking: pointer)
    }

    private static func makeRSA(n: [UInt8], e: [UInt8], privateParts: [[UInt8]]?) -> OpaquePointer? {
        // Flatten into one buffer so the C call sees stable pointers for all eight numbers at once.
        let numbers = [n, e] + (privateParts ?? [])
        var flat: [UInt8] = numbers.flatMap { $0 }
        defer {
            for i in flat.indices { flat[i] = 0 }
        }
        return flat.withUnsafeBytes { buffer -> OpaquePointer? in
            var pointers: [UnsafeRawPointer?] = []
            var lengths: [Int] = []
            var offset = 0
            for number in numbers {
                pointers.append(buffer.baseAddress! + offset)
                lengths.append(number.count)
                offset += number.count
            }
            while pointers.count < 8 {
                pointers.append(nil)
                lengths.append(0)
            }
            return CTokengateShims_pkey_rsa(
                pointers[0],
                lengths[0],
                pointers[1],
                lengths[1],
                pointers[2],
                lengths[2],
                pointers[3],
                lengths[3],
                pointers[4],
                lengths[4],
                pointers[5],
                lengths[5],
                pointers[6],
                lengths[6],
                pointers[7],
                lengths[7]
            )
        }
    }
}
