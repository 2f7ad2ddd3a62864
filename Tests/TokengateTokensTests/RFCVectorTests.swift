//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

/// The published examples of RFC 7515 Appendix A and RFC 8037 Appendix A.4.
///
/// The RFC 7515 payload is `{"iss":"joe","exp":1300819380,"http://example.com/is_root":true}`: no `sub` and no
/// `iat`. Two assertions per example pin the outcome precisely: the internal JWS-layer entry point
/// `checkSignature` must accept the signature, and the full verifier (at `now` = 1300819000, before `exp`)
/// must answer exactly `missing_claim`, which it can only reach *after* the signature step (a bad signature
/// would be `bad_signature`). RFC 8037's payload is a sentence, not JSON, so it is checked at the JWS layer
/// and the full verifier must answer `malformed` (the payload is not a claims set), again after the signature.
@Suite struct RFCVectorTests {
    static let payload =
        "eyJpc3MiOiJqb2UiLA0KICJleHAiOjEzMDA4MTkzODAsDQogImh0dHA6Ly9leGFtcGxlLmNvbS9pc19yb290Ijp0cnVlfQ"
    static let rfcNow: Int64 = 1_300_819_000

    static let a1Token =
        "eyJ0eXAiOiJKV1QiLA0KICJhbGciOiJIUzI1NiJ9." + payload
        + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
    static let a1Key =
        #"{"keys":[{"kty":"oct","k":"AyM1SysPpbyDfgZld3umj1qzKObwVMkoqQ-EstJQLr_T-1qS0gZH75aKtMN3Yj0iPS4hcgUuTwjAzZr1Z9CAow"}]}"#

    static let a2Token =
        "eyJhbGciOiJSUzI1NiJ9." + payload + "."
        + "cC4hiUPoj9Eetdgtv3hF80EGrhuB__dzERat0XF9g2VtQgr9PJbu3XOiZj5RZmh7AAuHIm4Bh-0Qc_lF5YKt_O8W2Fp5jujGbds9uJdbF9CUAr7t1dnZcAcQjbKBYNX4BAynRFdiuB--f_nZLgrnbyTyWzO75vRK5h6xBArLIARNPvkSjtQBMHlb1L07Qe7K0GarZRmB_eSN9383LcOLn6_dO--xi12jzDwusC-eOkHWEsqtFZESc6BfI7noOPqvhJ1phCnvWh6IeYI2w9QOYEUipUTI8np6LbgGY9Fs98rqVt5AXLIhWkWywlVmtVrBp0igcN_IoypGlUPQGe77Rw"
    static let a2Key =
        #"{"kty":"RSA","e":"AQAB","n":"ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddxHmfHQp-Vaw-4qPCJrcS2mJPMEzP1Pt0Bm4d4QlL-yRT-SFd2lZS-pCgNMsD1W_YpRPEwOWvG6b32690r2jZ47soMZo9wGzjb_7OMg0LOL-bSf63kpaSHSXndS5z5rexMdbBYUsLA9e-KXBdQOS-UTo7WTBEMa2R2CapHg665xsmtdVMTBQY4uDZlxvb3qCo5ZwKh9kG4LT6_I5IhlJH7aGhyxXFvUK-DWNmoudF8NAco9_h9iaGNj8q2ethFkMLs91kzk2PAcDTW9gb54h4FRWyuXpoQ"}"#

    static let a3Token =
        "eyJhbGciOiJFUzI1NiJ9." + payload + "."
        + "DtEhU3ljbEg8L38VWAfUAqOyKAM6-Xx-F4GawxaepmXFCgfTjDxw5djxLa8ISlSApmWQxfKTUJqPP3-Kg6NU1Q"
    static let a3Key =
        #"{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#

    static let a5Token = "eyJhbGciOiJub25lIn0." + payload + "."

    static let rfc8037Token =
        "eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc."
        + "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    static let rfc8037Key = #"{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#

    /// The RFC keys are published without `alg`; the oct and RSA ones serve several algorithms, so they are
    /// bound the way a configuration's keys entry binds them.
    static func verifier(_ jwks: String, algorithm: TokenAlgorithm? = nil) throws -> TokenVerifier {
        TokenVerifier(keys: try KeySet(jwks: Array(jwks.utf8), algorithm: algorithm))
    }

    static func full(_ verifier: TokenVerifier, _ token: String) -> String? {
        verifier.verify(token, accept: .any, cutoffs: .empty, now: Self.rfcNow).reason
    }

    /// Flips one character in the middle of the signature.
    static func tampered(_ token: String) -> String {
        var chars = Array(token)
        let index = chars.count - 10
        chars[index] = chars[index] == "A" ? "B" : "A"
        return String(chars)
    }

    @Test(arguments: [
        ("A.1 HS256", a1Key, a1Token, TokenAlgorithm.hs256),
        ("A.2 RS256", a2Key, a2Token, .rs256),
        ("A.3 ES256", a3Key, a3Token, nil),
    ])
    func rfc7515Examples(name: String, key: String, token: String, algorithm: TokenAlgorithm?) throws {
        let verifier = try Self.verifier(key, algorithm: algorithm)
        #expect(verifier.checkSignature(token) == nil, "\(name): the published signature must verify")
        #expect(Self.full(verifier, token) == "missing_claim", "\(name): good signature, but no sub/iat")
        #expect(verifier.checkSignature(Self.tampered(token)) == .badSignature, "\(name): a changed signature")
        #expect(Self.full(verifier, Self.tampered(token)) == "bad_signature")
    }

    @Test func rfc7515A5UnsecuredIsRejected() throws {
        let keys: [(String, TokenAlgorithm?)] = [
            (Self.a1Key, .hs256), (Self.a2Key, .rs256), (Self.a3Key, nil), (Self.rfc8037Key, nil),
        ]
        for (key, algorithm) in keys {
            let verifier = try Self.verifier(key, algorithm: algorithm)
            #expect(verifier.checkSignature(Self.a5Token) == .algNotAllowed)
            #expect(Self.full(verifier, Self.a5Token) == "alg_not_allowed")
        }
    }

    @Test func rfc8037A4Ed25519() throws {
        let verifier = try Self.verifier(Self.rfc8037Key)
        #expect(verifier.checkSignature(Self.rfc8037Token) == nil)
        #expect(Self.full(verifier, Self.rfc8037Token) == "malformed", "the payload is a sentence, not claims")
        #expect(verifier.checkSignature(Self.tampered(Self.rfc8037Token)) == .badSignature)
    }

    /// The RFC 8037 private key signs to exactly the published signature (Ed25519 is deterministic).
    @Test func rfc8037SigningIsDeterministic() throws {
        let privateKey =
            #"{"kty":"OKP","crv":"Ed25519","d":"nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}"#
        let jwk = try JWK(
            try JSONSerialization.jsonObject(with: Data(privateKey.utf8)),
            index: 0,
            operation: "sign"
        )
        let signer = try SigningKey(jwk)
        let signature = try signer.sign(Array("eyJhbGciOiJFZERTQSJ9.RXhhbXBsZSBvZiBFZDI1NTE5IHNpZ25pbmc".utf8))
        #expect(Base64URL.encode(signature) == Self.rfc8037Token.split(separator: ".")[2].description)
    }
}
