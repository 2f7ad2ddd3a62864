//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The 96-bit random nonce a token page code was sealed with (``TokenPageCodeKey``): drawn fresh for every
/// code, and authenticated with it, so it names one code. The gateway remembers the nonces of redeemed codes
/// to refuse a second redemption.
///
/// Why the nonce and not the code's text: it is fixed by the sealed bytes, so no other spelling of the same
/// code could pass as a new one; and it is 12 bytes held inline (two integers, no allocation per entry).
public struct TokenPageCodeNonce: Hashable, Sendable {
    private let high: UInt64
    private let low: UInt32

    /// Nil unless `bytes` holds exactly 12 bytes.
    init?(_ bytes: ArraySlice<UInt8>) {
        guard bytes.count == 12 else { return nil }
        var high: UInt64 = 0
        var low: UInt32 = 0
        for byte in bytes.prefix(8) { high = high << 8 | UInt64(byte) }
        for byte in bytes.suffix(4) { low = low << 8 | UInt32(byte) }
        self.high = high
        self.low = low
    }

    /// A nonce from its twelve bytes as two numbers (tests of the gateway's memory of redeemed codes).
    public init(high: UInt64, low: UInt32) {
        self.high = high
        self.low = low
    }
}
