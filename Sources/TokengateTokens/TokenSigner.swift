//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims
import Foundation

/// Mints tokens with a private key from a JWK Set (the CLI's `token mint`, the token page, tests).
/// Not on the request path.
public struct TokenSigner: Sendable {
    /// The algorithm every minted token uses: the key's `alg`, or the default for its type (HS256, EdDSA,
    /// ES256, RS256).
    public var algorithm: TokenAlgorithm { self.key.algorithm }
    /// The `kid` put in every header (the key's own).
    public var keyID: String? { self.key.keyID }
    public let claimNames: ClaimNames
    /// Encrypts and authenticates the token page's PKCE authorization codes: derived from this key's secret under
    /// its own label, so every gateway sharing the signing key opens the others' codes and no verification key
    /// equals it.
    public var tokenPageCodeKey: TokenPageCodeKey { self.key.codeKey }
    /// Makes and checks the token page's confirmation values (the "continue" button's proof that the browser was
    /// shown the page): derived from this key's secret under its own label, like ``tokenPageCodeKey``.
    public var tokenPageConfirmationKey: TokenPageConfirmationKey { self.key.confirmationKey }
    /// Makes and checks the token page's refresh tokens: derived like ``tokenPageCodeKey``, under its own label.
    public var refreshTokenKey: RefreshTokenKey { self.key.refreshKey }
    /// Internal (not private) so that tests can sign payloads ``mint(_:)`` refuses to write.
    let key: SigningKey

    /// - Parameters:
    ///   - privateJWKS: a JWK Set (or one JWK) holding private keys.
    ///   - keyID: which key to use; may be nil when the set holds exactly one key.
    ///   - algorithm: the configuration's `alg` for the key (`signing_key.alg`): it binds a JWK that has no
    ///     `alg` of its own, and one whose own `alg` differs is refused (`alg_mismatch`) rather than either
    ///     silently winning.
    /// - Throws: ``KeyLoadingError``.
    public init(
        privateJWKS: [UInt8],
        keyID: String? = nil,
        algorithm: TokenAlgorithm? = nil,
        claimNames: ClaimNames = ClaimNames()
    ) throws {
        let objects = try KeySet.parseKeyObjects(Data(privateJWKS))
        var candidates: [JWK] = []
        for (index, object) in objects.enumerated() {
            // Keys of other types may sit beside the one we want; only the selected key must be valid.
            if let keyID, let dict = object as? [String: Any], (dict["kid"] as? String) != keyID { continue }
            candidates.append(try JWK(object, index: index, operation: "sign", fallbackAlgorithm: algorithm))
        }
        guard let jwk = candidates.first else {
            throw KeyLoadingError(
                code: "unknown_kid",
                message: keyID == nil ? "the key set holds no keys" : "no key has this kid",
                keyID: keyID
            )
        }
        guard candidates.count == 1 else {
            throw KeyLoadingError(
                code: "missing_kid",
                message: "the key set holds several keys; choose one by its kid"
            )
        }
        guard jwk.hasPrivatePart else {
            throw KeyLoadingError(
                code: "no_private_key",
                message: "the key has no private part; minting needs the private JWK Set",
                keyIndex: jwk.index,
                keyID: jwk.keyID
            )
        }
        self.key = try SigningKey(jwk)
        if let algorithm, self.key.algorithm != algorithm {
            throw KeyLoadingError(
                code: "alg_mismatch",
                message: "the key's own alg is \(self.key.algorithm.rawValue), the configuration says \(algorithm.rawValue)",
                keyIndex: jwk.index,
                keyID: jwk.keyID
            )
        }
        self.claimNames = claimNames
    }

    /// Builds and signs a token.
    /// - Throws: ``TokenSigningError`` for a subject the verifier would refuse (``UserIDRules``), times outside
    ///   0 through year 9999, or a libcrypto failure.
    public func mint(_ claims: TokenClaims) throws -> String {
        if let problem = UserIDRules.problem(claims.subject) {
            throw TokenSigningError(code: "invalid_claims", message: "the subject \(problem)")
        }
        for time in [claims.issuedAt, claims.expiresAt, claims.notBefore].compactMap({ $0 })
        where !JSONScanner.numericDateRange.contains(time) {
            throw TokenSigningError(code: "invalid_claims", message: "times must be 0 through year 9999")
        }
        var header = "{\"alg\":\"\(self.algorithm.rawValue)\",\"typ\":\"JWT\""
        if let kid = self.keyID { header += ",\"kid\":" + Self.jsonString(kid) }
        header += "}"
        var payload = "{" + Self.jsonString(self.claimNames.user) + ":" + Self.jsonString(claims.subject)
        payload += "," + Self.jsonString(self.claimNames.issuedAt) + ":\(claims.issuedAt)"
        payload += "," + Self.jsonString(self.claimNames.apiOnly) + ":" + (claims.apiOnly ? "true" : "false")
        if let exp = claims.expiresAt { payload += ",\"exp\":\(exp)" }
        if let nbf = claims.notBefore { payload += ",\"nbf\":\(nbf)" }
        if let iss = claims.issuer { payload += ",\"iss\":" + Self.jsonString(iss) }
        if let aud = claims.audience { payload += ",\"aud\":" + Self.jsonString(aud) }
        if let device = claims.device { payload += ",\"\(DeviceID.claimName)\":\"" + device.text + "\"" }
        payload += "}"
        let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let signature = try self.key.sign(Array(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature)
    }

    /// A JSON string literal (RFC 8259 §7): quotes, backslashes and control characters escaped.
    static func jsonString(_ value: String) -> String {
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// The private key of a TokenSigner.
///
/// `@unchecked Sendable`: immutable after init; libcrypto signs with a fresh context per call and only
/// reads the key (`PKey`), and the HMAC object is read-only (see `CTokengateShims_crypto.h`).
final class SigningKey: @unchecked Sendable {
    private enum Storage {
        case hmac(SignatureCheck)
        case privateKey(PKey)
    }

    let algorithm: TokenAlgorithm
    let keyID: String?
    /// See ``TokenSigner/tokenPageCodeKey``.
    let codeKey: TokenPageCodeKey
    /// See ``TokenSigner/tokenPageConfirmationKey``.
    let confirmationKey: TokenPageConfirmationKey
    /// See ``TokenSigner/refreshTokenKey``.
    let refreshKey: RefreshTokenKey
    private let storage: Storage

    init(_ jwk: JWK) throws(KeyLoadingError) {
        let algorithm = jwk.declaredAlgorithm ?? jwk.algorithms[0]
        self.algorithm = algorithm
        self.keyID = jwk.keyID
        // The code and confirmation keys come from the private part: the HMAC secret, or the private scalar or
        // exponent `d`, which only the holders of the signing key know (a public key would let anyone seal codes
        // and confirm logins).
        let secret: [UInt8]?
        switch jwk.material {
        case .octet(let bytes): secret = bytes
        case .okp(_, let d), .ec(_, _, let d): secret = d
        case .rsa(_, _, let privateParts): secret = privateParts?.first
        }
        guard let secret, let codeKey = TokenPageCodeKey.derive(fromSecret: secret),
            let confirmationKey = TokenPageConfirmationKey.derive(fromSecret: secret),
            let refreshKey = RefreshTokenKey.derive(fromSecret: secret)
        else {
            throw KeyLoadingError(
                code: "invalid_key",
                message: "cannot derive the token page's code and confirmation keys from the private key",
                keyIndex: jwk.index,
                keyID: jwk.keyID
            )
        }
        self.codeKey = codeKey
        self.confirmationKey = confirmationKey
        self.refreshKey = refreshKey
        switch jwk.material {
        case .octet(let secret):
            guard let check = SignatureCheck(hmacBits: algorithm.hmacBits!, secret: secret) else {
                throw KeyLoadingError(
                    code: "invalid_key",
                    message: "cannot prepare the HMAC key",
                    keyIndex: jwk.index,
                    keyID: jwk.keyID
                )
            }
            self.storage = .hmac(check)
        case .okp, .ec, .rsa:
            self.storage = .privateKey(try jwk.makePKey(includePrivate: true))
        }
    }

    func sign(_ data: [UInt8]) throws(TokenSigningError) -> [UInt8] {
        switch self.storage {
        case .hmac(let check):
            return check.hmacTag(data)!
        case .privateKey(let pkey):
            var signature = [UInt8](repeating: 0, count: 1024)
            var length = signature.count
            let ok = data.withUnsafeBytes { d in
                signature.withUnsafeMutableBytes { s in
                    CTokengateShims_sign(
                        pkey.pointer,
                        self.algorithm.shimScheme!,
                        d.baseAddress,
                        d.count,
                        s.baseAddress,
                        &length
                    )
                }
            }
            guard ok == 1 else { throw TokenSigningError(code: "signing_failed", message: "libcrypto could not sign") }
            return Array(signature[0..<length])
        }
    }
}
