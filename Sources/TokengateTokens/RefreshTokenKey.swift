//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Makes and checks the token page's refresh tokens (RFC 6749 §6): opaque to apps, 76 characters of base64url.
///
/// ### What a refresh token is
/// `version ‖ device (16 bytes) ‖ generation (8 bytes, big endian) ‖ HMAC-SHA256 tag (32 bytes)`, the tag over the
/// first 25 bytes under a key derived from the signing key (its own label, like the code and confirmation keys).
/// The store keeps, per device, the generation of the one refresh token that is current; every use rotates it
/// (the store moves the generation on, in one statement shared by every instance). So:
/// - a value whose tag does not check is no refresh token (`invalid_grant`), and tells nothing about any device;
/// - an authentic value of the current generation is rotated once, whichever instance gets it first;
/// - an authentic value of an earlier generation was used already: it was stolen, or the app lost a rotation.
///   Either way the device is revoked (RFC 9700 §4.14.2), on every instance.
///
/// Nothing secret is stored: the tag is what only the gateways holding the signing key can make, and a database
/// dump gives no refresh token. Like an authorization code, the value never goes into a log, a URL or an error.
public struct RefreshTokenKey: Sendable {
    static let version: UInt8 = 1
    static let byteCount = 1 + 16 + 8 + 32
    /// ``byteCount`` bytes in unpadded base64url.
    public static let textLength = 76
    static let label = Array("tokengate refresh token v1".utf8)

    private let mac: SignatureCheck

    init(mac: SignatureCheck) {
        self.mac = mac
    }

    static func derive(fromSecret secret: [UInt8]) -> RefreshTokenKey? {
        LabeledKeyDerivation.derive(fromSecret: secret, label: Self.label) { derived in
            SignatureCheck(hmacBits: 256, secret: derived).map { RefreshTokenKey(mac: $0) }
        }
    }

    /// The refresh token of `device` at `generation`.
    public func issue(device: DeviceID, generation: Int64) -> String {
        let signed = Self.signed(device: device, generation: generation)
        return Base64URL.encode(signed + self.mac.hmacTag(signed)!)  // An HMAC key always has a tag.
    }

    /// The device and generation of a refresh token this key made; nil for anything else (the tag is compared in
    /// constant time, and only a value of the exact length is decoded at all).
    public func open(_ value: String) -> (device: DeviceID, generation: Int64)? {
        guard value.utf8.count == Self.textLength, let bytes = Base64URL.decode(value), bytes.count == Self.byteCount,
            bytes[0] == Self.version
        else { return nil }
        let signed = Array(bytes[0..<25])
        let matches = signed.withUnsafeBytes { data in
            bytes[25...].withUnsafeBytes { self.mac.verify(data: data, signature: $0) }
        }
        guard matches else { return nil }
        let high = bytes[1..<9].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        let low = bytes[9..<17].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) }
        let generation = Int64(bitPattern: bytes[17..<25].reduce(UInt64(0)) { ($0 << 8) | UInt64($1) })
        return (DeviceID(high: high, low: low), generation)
    }

    private static func signed(device: DeviceID, generation: Int64) -> [UInt8] {
        let number = UInt64(bitPattern: generation)
        return [Self.version] + device.bytes + (0..<8).map { UInt8((number >> (56 - 8 * UInt64($0))) & 0xFF) }
    }
}
