//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Seals and opens token page authorization codes: `base64url(version ‖ nonce ‖ ciphertext ‖ tag)`, the payload
/// of ``TokenPageCode`` encrypted and authenticated with AES-256-GCM (``AES256GCMKey``) under a key derived from
/// the signing key; `version` (one byte, ``version``) is the associated data.
///
/// ### Why encrypted
/// The code travels through the browser to the app's callback, and on Android any app that claims the same
/// custom scheme receives it. Without the verifier it cannot redeem the code, but a readable payload told it
/// who had just logged in (the user id, often an e-mail address). Encrypted, the code tells it nothing but its
/// length. Authenticated, it cannot be altered or forged: a change to any byte, or a code sealed with another
/// signing key, fails the tag check before anything of the payload is read.
///
/// ### Why stateless, and what is not
/// The code needs no shared store: every gateway instance that shares the signing key derives the same code key
/// (``TokenSigner/tokenPageCodeKey``), so a code issued by one instance behind a load balancer is redeemed
/// by another. Single use is the gateway's: it remembers the ``TokenPageCodeNonce`` of each code it redeemed
/// until the code expires, per process (RFC 6749 §4.1.2); instances do not share that memory.
///
/// ### Why a code never passes as a token
/// It has no dot, a JWT has two; and its key is derived from the signing key under its own label, which no
/// verification key equals: presented at an API route it is malformed, and even re-shaped it could not verify.
///
/// ### Versions
/// The first byte is the format's version, and a new format gets a new byte and a new key label (``label``).
/// A code of another format is refused as malformed, as any other code that does not open. The previous
/// format (v2: `base64url(payload).base64url(HMAC)`, its payload readable) has a dot, which is no base64url.
public struct TokenPageCodeKey: Sendable {
    /// What a code may not be longer than (a 256-byte user id escaped six times over still fits).
    public static let maximumLength = 4096

    /// The format's first byte, and the associated data its tag covers.
    static let version: UInt8 = 3

    /// Why a code was not redeemed. The descriptions say which check failed, and nothing of the code.
    public enum Refusal: String, Error, Sendable, Equatable, CaseIterable {
        /// Not base64url, too long or too short, another format's version, or a payload this version does not
        /// read.
        case malformed
        /// The authentication tag does not match: altered, or sealed with another signing key.
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

    /// A code that passed every check of ``redeem(_:app:page:verifier:now:clockSkew:)``: what it carries, and
    /// the nonce that names it for the gateway's single-use check.
    public struct Redeemable: Sendable, Equatable {
        public var code: TokenPageCode
        public var nonce: TokenPageCodeNonce
    }

    private let cipher: AES256GCMKey

    /// The label that separates the code key from every other use of the signing key's secret. A new code
    /// format gets a new label, so old codes stop opening (v2 was the HMAC key of the readable format).
    static let label = Array("tokengate token page code v3".utf8)

    init(cipher: AES256GCMKey) {
        self.cipher = cipher
    }

    /// The code key for `secret` (the signing key's secret bytes): the AES-256 key HMAC-SHA256(secret, ``label``).
    static func derive(fromSecret secret: [UInt8]) -> TokenPageCodeKey? {
        LabeledKeyDerivation.derive(fromSecret: secret, label: Self.label) { derived in
            AES256GCMKey(derived).map { TokenPageCodeKey(cipher: $0) }
        }
    }

    /// The code, ready for the callback's fragment (base64url only). Nil when libcrypto fails, its random number
    /// generator included: no code is better than one under a nonce that may repeat.
    public func seal(_ code: TokenPageCode) -> String? {
        guard let sealed = self.cipher.seal(code.payload, associatedData: [Self.version]) else { return nil }
        return Base64URL.encode([Self.version] + sealed)
    }

    /// Opens `text` and checks it for a redemption, in this order: shape, tag, times, app, page, verifier. The
    /// tag comes first so that nothing of a forged payload is ever looked at.
    ///
    /// Single use is not checked here: the caller remembers ``Redeemable/nonce`` (the gateway does, per process).
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
    ) -> Result<Redeemable, Refusal> {
        let opened: Redeemable
        switch self.open(text) {
        case .success(let result): opened = result
        case .failure(let refusal): return .failure(refusal)
        }
        let code = opened.code
        guard now < code.expiresAt else { return .failure(.expired) }
        guard code.issuedAt <= now + clockSkew else { return .failure(.issuedInFuture) }
        guard code.app == app else { return .failure(.wrongApp) }
        guard code.page == page else { return .failure(.wrongPage) }
        guard code.challenge.isAnswered(by: verifier) else { return .failure(.wrongVerifier) }
        return .success(opened)
    }

    /// The code's payload and nonce when its tag is right; no other check.
    func open(_ text: String) -> Result<Redeemable, Refusal> {
        // The length first, before decoding anything.
        guard text.utf8.count <= Self.maximumLength, let bytes = Base64URL.decode(text),
            bytes.count > 1 + AES256GCMKey.overhead, bytes[0] == Self.version
        else { return .failure(.malformed) }
        let sealed = bytes[1...]
        guard let payload = self.cipher.open(sealed, associatedData: [Self.version]) else {
            return .failure(.badSignature)
        }
        let nonce = TokenPageCodeNonce(sealed.prefix(AES256GCMKey.nonceLength))!
        guard let code = TokenPageCode(payload: payload) else { return .failure(.malformed) }
        return .success(Redeemable(code: code, nonce: nonce))
    }
}
