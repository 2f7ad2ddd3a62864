//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// The id of one installation of an app (a device): 128 random bits the gateway draws when its token page mints
/// the first token of that installation, never a value an app chooses. Tokens carry it in the `did` claim as 22
/// characters of base64url; the cutoff store keeps a record of it (``DeviceRecord``), and revoking it kills every
/// token that carries it (``CutoffSnapshot/revokedDevices``).
///
/// Held as two integers: the request path reads it out of a token's payload and looks it up in the revoked set
/// without allocating, where a 22-byte `String` would need a heap buffer. Only the one spelling the gateway
/// writes parses (exactly 22 canonical base64url characters): a forged, padded or oversized claim is malformed,
/// never a second name for a device.
public struct DeviceID: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    /// The claim name tokens carry it under.
    public static let claimName = "did"
    /// Characters of its text form: 16 bytes in unpadded base64url.
    public static let textLength = 22

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A fresh id from libcrypto's CSPRNG; nil only when the generator fails (then nothing is minted).
    public static func random() -> DeviceID? {
        var bytes = (UInt64(0), UInt64(0))
        let ok = withUnsafeMutableBytes(of: &bytes) { CTokengateShims_random($0.baseAddress, $0.count) }
        guard ok == 1 else { return nil }
        return DeviceID(high: bytes.0, low: bytes.1)
    }

    /// Parses the text form; nil for anything but exactly 22 canonical base64url characters.
    public init?(_ text: String) {
        var copy = text
        guard let parsed = copy.withUTF8({ DeviceID(bytes: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Parses the text form from raw bytes (the request path: a span of a decoded payload). No allocation.
    public init?(bytes: UnsafeRawBufferPointer) {
        guard bytes.count == Self.textLength, let base = bytes.baseAddress else { return nil }
        var decoded = (UInt64(0), UInt64(0), UInt64(0))  // 24 bytes: room for the decoder's 16 and more
        let length = withUnsafeMutableBytes(of: &decoded) { out in
            Base64URL.decode(UnsafeRawBufferPointer(start: base, count: bytes.count), into: out.baseAddress!)
        }
        guard length == 16 else { return nil }
        var high: UInt64 = 0
        var low: UInt64 = 0
        withUnsafeBytes(of: &decoded) { raw in
            for index in 0..<8 { high = high << 8 | UInt64(raw[index]) }
            for index in 8..<16 { low = low << 8 | UInt64(raw[index]) }
        }
        self.high = high
        self.low = low
    }

    /// The 16 bytes, big-endian.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16)
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: self.high >> UInt64(shift))) }
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: self.low >> UInt64(shift))) }
        return out
    }

    /// The text form: 22 characters of base64url, as in the `did` claim, the store and the admin API.
    public var text: String { Base64URL.encode(self.bytes) }

    public var description: String { self.text }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool {
        (lhs.high, lhs.low) < (rhs.high, rhs.low)
    }
}
