//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// A key derived from the signing key's secret for one use: HMAC-SHA256(secret, label).
///
/// The token page's code key and confirmation key are both made this way, each under its own label, so that no
/// key of one use equals a key of another (nor any verification key). The derived bytes are handed to `build`
/// and wiped right after, whatever `build` made of them: they are key material, and the only copy that should
/// remain is inside the key `build` returns.
enum LabeledKeyDerivation {
    /// `build`'s result for HMAC-SHA256(`secret`, `label`); nil when libcrypto fails or `build` gives nil.
    static func derive<Key>(fromSecret secret: [UInt8], label: [UInt8], _ build: ([UInt8]) -> Key?) -> Key? {
        guard let derivation = SignatureCheck(hmacBits: 256, secret: secret),
            var derived = derivation.hmacTag(label)
        else { return nil }
        defer { CTokengateShims_cleanse(&derived, derived.count) }
        return build(derived)
    }
}
