//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Seals and opens token page authorization codes: `base64url(payload) "." base64url(HMAC-SHA256(codeKey,
/// payload))`, with the payload of ``TokenPageCode``.
///
/// ### Why stateless
/// The code needs no store: every gateway instance that shares the signing key derives the same code key
/// (``TokenSigner/tokenPageCodeKey``), so a code issued by one instance behind a load balancer is redeemed
/// by another. The price is that a code can be redeemed more than once within its 60 seconds; each
/// redemption needs the verifier, which never leaves the app that made it, so a replay is only possible for
/// that app (RFC 7636's threat is an app that reads the redirect, and it has no verifier).
///
/// ### Why a code never passes as a token
/// It has one dot, a JWT has two, and its MAC is made with a key derived from the signing key under its own
/// label, which no verification key equals: presented at an API route it is malformed, and even re-shaped it
/// could not verify.
public struct TokenPageCodeKey: Sendable {
    /// What a code may not be longer than (a 256-byte user id escaped six times over still fits).
    public static let maximumLength = 4096

    /// Why a code was not redeemed. The descriptions say which check failed, and nothing of the code.
    public enum Refusal: String, Error, Sendable, Equatable, CaseIterable {
        /// Not two base64url parts, too long, or a payload this version does not read.
        case malformed
        /// The MAC does not match: altered, or sealed with another signing key.
        case badSignature = "bad_signature"
        case expired
        /// Issued later than now (beyond the clock skew allowed): a gateway instance whose clock runs ahead.
        case issuedInFuture = "issued_in_future"
        /// Issued to another app than the one redeeming it.
        case wrongApp = "wrong_app"
        /// Issued by another token page than the one redeeming it.
        case wrongPage = "wrong_page"
        /// The verifier's SHA-256 is not the challenge (or the verifier is malformed).
        case wrongVerifier = "wrong_verifier"
    }

    private let mac: SignatureCheck

    /// The label that separates the code key from every other use of the signing key's secret. A new code
    /// format gets a new label, so old codes stop opening.
    static let label = Array("tokengate token page code v2".utf8)

    init(mac: SignatureCheck) {
        self.mac = mac
    }

    /// The code key for `secret` (the signing key's secret bytes): HMAC-SHA256(secret, ``label``).
    static func derive(fromSecret secret: [UInt8]) -> TokenPageCodeKey? {
        guard let derivation = SignatureCheck(hmacBits: 256, secret: secret),
            let derived = derivation.hmacTag(Self.label),
            let mac = SignatureCheck(hmacBits: 256, secret: derived)
        else { return nil }
        return TokenPageCodeKey(mac: mac)
    }

    /// The code, ready for the callback's fragment (base64url and one dot only).
    public func seal(_ code: TokenPageCode) -> String {
        let payload = code.payload
        // `hmacTag` fails only when libcrypto cannot allocate a context; the key was tested when it was derived.
        return Base64URL.encode(payload) + "." + Base64URL.encode(self.mac.hmacTag(payload)!)
    }

    /// Opens `text` and checks it for a redemption, in this order: shape, MAC, times, app, page, verifier. The
    /// MAC comes first so that nothing of a forged payload is ever looked at.
    ///
    /// - Parameters:
    ///   - page: the redeeming token page (its host and path prefix), which must be the one that issued the code.
    ///   - clockSkew: how far ahead of `now` an issue time may be (another instance's clock), as for tokens' `iat`.
    public func redeem(
        _ text: String,
        app: String,
        page: String,
        verifier: String,
        now: Int64,
        clockSkew: Int64
    ) -> Result<TokenPageCode, Refusal> {
        let code: TokenPageCode
        switch self.open(text) {
        case .success(let opened): code = opened
        case .failure(let refusal): return .failure(refusal)
        }
        guard now < code.expiresAt else { return .failure(.expired) }
        guard code.issuedAt <= now + clockSkew else { return .failure(.issuedInFuture) }
        guard code.app == app else { return .failure(.wrongApp) }
        guard code.page == page else { return .failure(.wrongPage) }
        guard code.challenge.isAnswered(by: verifier) else { return .failure(.wrongVerifier) }
        return .success(code)
    }

    /// The code's payload when its MAC is right; no other check.
    func open(_ text: String) -> Result<TokenPageCode, Refusal> {
        let utf8 = Array(text.utf8)
        guard utf8.count <= Self.maximumLength,
            let dot = utf8.firstIndex(of: UInt8(ascii: ".")),
            !utf8[(dot + 1)...].contains(UInt8(ascii: "."))
        else { return .failure(.malformed) }
        guard let payload = Base64URL.decode(String(decoding: utf8[..<dot], as: UTF8.self)), !payload.isEmpty,
            let tag = Base64URL.decode(String(decoding: utf8[(dot + 1)...], as: UTF8.self))
        else { return .failure(.malformed) }
        let valid = payload.withUnsafeBytes { p in tag.withUnsafeBytes { t in self.mac.verify(data: p, signature: t) } }
        guard valid else { return .failure(.badSignature) }
        guard let code = TokenPageCode(payload: payload) else { return .failure(.malformed) }
        return .success(code)
    }
}
