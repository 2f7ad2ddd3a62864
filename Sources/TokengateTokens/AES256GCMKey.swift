//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// An AES-256-GCM key that seals with a fresh random nonce every time: `nonce ‖ ciphertext ‖ tag` (12, n and
/// 16 bytes). Used for the token page's PKCE codes (``TokenPageCodeKey``).
///
/// ### Why the nonce is drawn here
/// GCM with one key must never see a nonce twice: two messages under the same nonce give away the XOR of
/// their plaintexts and let anyone forge tags. Drawing the nonce inside ``seal(_:associatedData:)``, from
/// libcrypto's CSPRNG, leaves no caller a way to pass one twice. 96 random bits keep the chance of a repeat
/// under 2⁻³² for up to 2³² codes per key (NIST SP 800-38D §8.3), far beyond any signing key's life. When the
/// CSPRNG fails, nothing is sealed (fail closed), never a fixed or counter nonce.
///
/// ### Why a class
/// The key bytes live in one allocation that ``deinit`` wipes, instead of a Swift array whose copies the
/// runtime may leave behind. `@unchecked Sendable`: those bytes are written once in `init` and only read
/// afterwards (each C call copies them into its own cipher context), and wiped in `deinit`, when no thread
/// can hold a reference any more.
final class AES256GCMKey: @unchecked Sendable {
    static let keyLength = Int(CTokengateShims_AES256GCM_KEY_LENGTH)
    static let nonceLength = Int(CTokengateShims_AES256GCM_NONCE_LENGTH)
    static let tagLength = Int(CTokengateShims_AES256GCM_TAG_LENGTH)
    /// What sealing adds to the plaintext: the nonce before it, the tag after.
    static let overhead = nonceLength + tagLength

    private let key: UnsafeMutableRawBufferPointer

    /// Nil unless `bytes` holds exactly 32 bytes. The caller's array is not wiped; derive the key into a
    /// temporary and let it go.
    init?(_ bytes: [UInt8]) {
        guard bytes.count == Self.keyLength else { return nil }
        self.key = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.keyLength, alignment: 16)
        bytes.withUnsafeBytes { self.key.copyMemory(from: $0) }
    }

    deinit {
        CTokengateShims_cleanse(self.key.baseAddress, self.key.count)
        self.key.deallocate()
    }

    /// `nonce ‖ ciphertext ‖ tag` for `plaintext`, authenticating `associatedData` too (it is not in the
    /// output; ``open(_:associatedData:)`` must be given the same bytes). Nil when libcrypto fails, the CSPRNG
    /// included.
    func seal(_ plaintext: [UInt8], associatedData: [UInt8]) -> [UInt8]? {
        var sealed = [UInt8](repeating: 0, count: Self.nonceLength + plaintext.count + Self.tagLength)
        let ok = sealed.withUnsafeMutableBytes { out -> Bool in
            let nonce = out.baseAddress!
            // The nonce first: a failed draw leaves zeros, and nothing is encrypted under them.
            guard CTokengateShims_random(nonce, Self.nonceLength) == 1 else { return false }
            let ciphertext = nonce + Self.nonceLength
            let tag = ciphertext + plaintext.count
            return plaintext.withUnsafeBytes { p in
                associatedData.withUnsafeBytes { a in
                    CTokengateShims_aes256gcm_seal(
                        self.key.baseAddress, nonce, a.baseAddress, a.count, p.baseAddress, p.count, ciphertext, tag)
                }
            } == 1
        }
        return ok ? sealed : nil
    }

    /// The plaintext of `sealed` (`nonce ‖ ciphertext ‖ tag`) when its tag is right for it and
    /// `associatedData`; nil otherwise (too short, altered, sealed with another key or other associated data).
    func open(_ sealed: ArraySlice<UInt8>, associatedData: [UInt8]) -> [UInt8]? {
        guard sealed.count >= Self.overhead else { return nil }
        let ciphertextLength = sealed.count - Self.overhead
        var plaintext = [UInt8](repeating: 0, count: ciphertextLength)
        let ok = sealed.withUnsafeBytes { s in
            plaintext.withUnsafeMutableBytes { p in
                associatedData.withUnsafeBytes { a in
                    let nonce = s.baseAddress!
                    let ciphertext = nonce + Self.nonceLength
                    return CTokengateShims_aes256gcm_open(
                        self.key.baseAddress, nonce, a.baseAddress, a.count, ciphertext, ciphertextLength,
                        ciphertext + ciphertextLength, p.baseAddress)
                }
            }
        }
        return ok == 1 ? plaintext : nil
    }
}
