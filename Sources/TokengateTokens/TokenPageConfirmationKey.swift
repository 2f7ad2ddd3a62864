//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Issues and checks the token page's confirmation values: `base64url(version ‖ issued-at ‖ tag)`, where the tag
/// is HMAC-SHA256 under a key derived from the signing key, over the version, the issue time (UNIX milliseconds,
/// 8 bytes, big endian) and everything the confirmation is bound to (``TokenPageConfirmation/message``).
///
/// ### Why
/// The confirmation page's "continue" button posts this value back. It proves that the browser posting it was
/// shown the page, for this browser (its confirmation cookie), user, app, state and challenge, between
/// ``minimumDelayMilliseconds`` and ``lifetime`` seconds ago: a form that another site (or an app opening the
/// browser at its own page) submits has no value, or one made for another browser or login, and is refused. The value is short-lived, so one left in a browser's history is soon
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

    /// How soon after the page was made a click counts, in milliseconds.
    ///
    /// Double-clickjacking: another page asks the user to double-click, navigates the window to the token page on
    /// the first press, and the second press lands on "continue" before the user has seen the page. Nothing on
    /// the page can stop that click (no script, and the page is not framed), but a click that comes less than a
    /// second after the page was made cannot be a decision about it: it is refused and the page shown again.
    public static let minimumDelayMilliseconds: Int64 = 1000

    /// The format's first byte. Version 1 carried the issue time in seconds (too coarse for
    /// ``minimumDelayMilliseconds``); it is refused as `malformed`.
    static let version: UInt8 = 2
    /// Version, issue time, HMAC-SHA256 tag.
    static let byteCount = 1 + 8 + 32
    /// ``byteCount`` bytes in unpadded base64url: 13 groups of 3 bytes make 52 characters, the last 2 bytes 3.
    static let textLength = 55

    /// Why a value was refused. A value made for another browser (confirmation cookie), app, state, challenge, user or page is a
    /// `mismatch`, as is a forged or altered one: the tag cannot tell them apart, and need not.
    public enum Refusal: String, Error, Sendable, Equatable, CaseIterable {
        /// Not base64url of the right length, or another version.
        case malformed
        /// The tag does not match this cookie and these parameters (or another signing key made it).
        case mismatch
        case expired
        /// Issued later than now, beyond the clock skew allowed (another instance's clock runs ahead).
        case issuedInFuture = "issued_in_future"
        /// Clicked less than ``minimumDelayMilliseconds`` after the page was made (double-clickjacking).
        case tooSoon = "too_soon"
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
        LabeledKeyDerivation.derive(fromSecret: secret, label: Self.label) { derived in
            SignatureCheck(hmacBits: 256, secret: derived).map { TokenPageConfirmationKey(mac: $0) }
        }
    }

    /// A value for the confirmation page's form (base64url only, 55 characters).
    /// - Parameter nowMilliseconds: the issue time, UNIX milliseconds.
    public func issue(_ confirmation: TokenPageConfirmation, nowMilliseconds: Int64) -> String {
        var signed = Self.prefix(issuedAt: nowMilliseconds)
        let tag = self.mac.hmacTag(signed + confirmation.message)!  // An HMAC key always has a tag.
        signed += tag
        return Base64URL.encode(signed)
    }

    /// Checks `value` for `confirmation`, in this order: shape, tag (compared in constant time), times. The tag
    /// comes before the times, so nothing of a forged value is believed.
    /// - Parameters:
    ///   - nowMilliseconds: UNIX milliseconds.
    ///   - clockSkew: seconds an issue time may lie ahead of now (another instance's clock).
    public func check(
        _ value: String,
        for confirmation: TokenPageConfirmation,
        nowMilliseconds now: Int64,
        clockSkew: Int64
    ) -> Refusal? {
        guard value.utf8.count == Self.textLength, let bytes = Base64URL.decode(value), bytes.count == Self.byteCount,
            bytes[0] == Self.version
        else { return .malformed }
        let signed = Array(bytes[0..<9])
        let tag = bytes[9...]
        let message = signed + confirmation.message
        let matches = message.withUnsafeBytes { data in
            tag.withUnsafeBytes { self.mac.verify(data: data, signature: $0) }
        }
        guard matches else { return .mismatch }
        let issuedAt = Int64(bitPattern: bytes[1..<9].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) })
        guard issuedAt <= now + clockSkew * 1000 else { return .issuedInFuture }
        guard now < issuedAt + Self.lifetime * 1000 else { return .expired }
        // Less than the delay since the page was made, by this clock, is a click the user may not have seen the page
        // for. A value made ahead of this clock (another instance running fast, or this clock stepped back) counts
        // the same: letting it through would let a clock difference beat the delay. The page shown again is made
        // by the instance that answers, so the next click is judged on one clock and goes through.
        guard now - issuedAt >= Self.minimumDelayMilliseconds else { return .tooSoon }
        return nil
    }

    /// The version byte and the issue time (milliseconds), big endian.
    private static func prefix(issuedAt: Int64) -> [UInt8] {
        let time = UInt64(bitPattern: issuedAt)
        return [Self.version] + (0..<8).map { UInt8((time >> (56 - 8 * UInt64($0))) & 0xFF) }
    }
}
