//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// Issues and checks the token page's confirmation values: `base64url(version ‖ issued-at ‖ tag)`, where the tag
/// is HMAC-SHA256 under a key derived from the signing key, over the version, the issue time (8 bytes, big
/// endian) and everything the confirmation is bound to (``TokenPageConfirmation/message``).
///
/// ### Why
/// The confirmation page's "continue" button posts this value back. It proves that the browser posting it was
/// shown the page, for this session, app, state and challenge, within the last ``lifetime`` seconds: a form that
/// another site (or an app opening the browser at its own page) submits has no value, or one made for another
/// session or login, and is refused. The value is short-lived, so one left in a browser's history is soon
/// useless; it is not single-use (a double click, or a reload of the page after a refused click, is harmless:
/// each click issues a new code, which only the app's verifier redeems).
///
/// ### Why stateless
/// Nothing is stored: every gateway instance that shares the signing key derives the same key
/// (``TokenSigner/tokenPageConfirmationKey``), so the page shown by one instance is confirmed at another.
///
/// ### Why its own key
/// The key is HMAC-SHA256(signing secret, ``label``): no verification key and no code key equals it, so a value
/// can never pass as a token or a code, nor the reverse.
public struct TokenPageConfirmationKey: Sendable {
    /// How long the page's "continue" works: time to read the page and decide, not to leave it in a tab for a day.
    public static let lifetime: Int64 = 300

    /// The format's first byte.
    static let version: UInt8 = 1
    /// Version, issue time, HMAC-SHA256 tag.
    static let byteCount = 1 + 8 + 32
    /// ``byteCount`` bytes in unpadded base64url: 13 groups of 3 bytes make 52 characters, the last 2 bytes 3.
    static let textLength = 55

    /// Why a value was refused. A value made for another session, app, state, challenge, user or page is a
    /// `mismatch`, as is a forged or altered one: the tag cannot tell them apart, and need not.
    public enum Refusal: String, Error, Sendable, Equatable, CaseIterable {
        /// Not base64url of the right length, or another version.
        case malformed
        /// The tag does not match this session and these parameters (or another signing key made it).
        case mismatch
        case expired
        /// Issued later than now, beyond the clock skew allowed (another instance's clock runs ahead).
        case issuedInFuture = "issued_in_future"
    }

    private let mac: SignatureCheck

    /// The label that separates this key from every other use of the signing key's secret.
    static let label = Array("tokengate token page confirmation v1".utf8)

    init(mac: SignatureCheck) {
        self.mac = mac
    }

    /// The confirmation key for `secret` (the signing key's secret bytes): HMAC-SHA256 keyed with
    /// HMAC-SHA256(secret, ``label``).
    static func derive(fromSecret secret: [UInt8]) -> TokenPageConfirmationKey? {
        guard let derivation = SignatureCheck(hmacBits: 256, secret: secret),
            var derived = derivation.hmacTag(Self.label)
        else { return nil }
        defer { CTokengateShims_cleanse(&derived, derived.count) }
        guard let mac = SignatureCheck(hmacBits: 256, secret: derived) else { return nil }
        return TokenPageConfirmationKey(mac: mac)
    }

    /// A value for the confirmation page's form (base64url only, 55 characters).
    public func issue(_ confirmation: TokenPageConfirmation, now: Int64) -> String {
        var signed = Self.prefix(issuedAt: now)
        let tag = self.mac.hmacTag(signed + confirmation.message)!  // An HMAC key always has a tag.
        signed += tag
        return Base64URL.encode(signed)
    }

    /// Checks `value` for `confirmation`, in this order: shape, tag (compared in constant time), times. The tag
    /// comes before the times, so nothing of a forged value is believed.
    public func check(
        _ value: String,
        for confirmation: TokenPageConfirmation,
        now: Int64,
        clockSkew: Int64
    ) -> Refusal? {
        guard value.utf8.count == Self.textLength, let bytes = Base64URL.decode(value), bytes.count == Self.byteCount, bytes[0] == Self.version
        else { return .malformed }
        let signed = Array(bytes[0..<9])
        let tag = bytes[9...]
        let message = signed + confirmation.message
        let matches = message.withUnsafeBytes { data in
            tag.withUnsafeBytes { self.mac.verify(data: data, signature: $0) }
        }
        guard matches else { return .mismatch }
        let issuedAt = Int64(bitPattern: bytes[1..<9].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) })
        guard issuedAt <= now + clockSkew else { return .issuedInFuture }
        guard now < issuedAt + Self.lifetime else { return .expired }
        return nil
    }

    /// The version byte and the issue time, big endian.
    private static func prefix(issuedAt: Int64) -> [UInt8] {
        let time = UInt64(bitPattern: issuedAt)
        return [Self.version] + (0..<8).map { UInt8((time >> (56 - 8 * UInt64($0))) & 0xFF) }
    }
}
