//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// A derived AES-256-GCM key (Rails' encrypted cookies), held in one allocation that ``deinit`` wipes.
///
/// `@unchecked Sendable`: the bytes are written once in `init` and only read afterwards (each C call copies them
/// into its own cipher context), and wiped in `deinit`, when no thread can hold a reference any more.
final class GCMKey: @unchecked Sendable {
    static let keyLength = Int(CTokengateShims_AES256GCM_KEY_LENGTH)
    static let nonceLength = Int(CTokengateShims_AES256GCM_NONCE_LENGTH)
    static let tagLength = Int(CTokengateShims_AES256GCM_TAG_LENGTH)

    private let key: UnsafeMutableRawBufferPointer

    init?(_ bytes: [UInt8]) {
        guard bytes.count == Self.keyLength else { return nil }
        self.key = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.keyLength, alignment: 16)
        bytes.withUnsafeBytes { self.key.copyMemory(from: $0) }
    }

    deinit {
        CTokengateShims_cleanse(self.key.baseAddress, self.key.count)
        self.key.deallocate()
    }

    /// Decrypts `ciphertext` into `plaintext` (as many bytes) when `tag` authenticates it under `nonce` with empty
    /// associated data, as Rails' `MessageEncryptor` seals (`auth_data = ""`). On failure `plaintext` is wiped.
    func open(
        ciphertext: UnsafeRawBufferPointer, nonce: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
        into plaintext: UnsafeMutableRawPointer
    ) -> Bool {
        guard nonce.count == Self.nonceLength, tag.count == Self.tagLength else { return false }
        return CTokengateShims_aes256gcm_open(
            self.key.baseAddress, nonce.baseAddress, nil, 0, ciphertext.baseAddress, ciphertext.count, tag.baseAddress,
            plaintext) == 1
    }

    /// `(ciphertext, nonce, tag)` for `plaintext` under a fresh random nonce (never reused: drawn here, from
    /// libcrypto's CSPRNG). Nil when libcrypto fails, the CSPRNG included.
    func seal(_ plaintext: [UInt8]) -> (ciphertext: [UInt8], nonce: [UInt8], tag: [UInt8])? {
        var nonce = [UInt8](repeating: 0, count: Self.nonceLength)
        var tag = [UInt8](repeating: 0, count: Self.tagLength)
        var ciphertext = [UInt8](repeating: 0, count: plaintext.count)
        guard nonce.withUnsafeMutableBytes({ CTokengateShims_random($0.baseAddress, $0.count) }) == 1 else {
            return nil
        }
        let ok = plaintext.withUnsafeBytes { p in
            ciphertext.withUnsafeMutableBytes { c in
                nonce.withUnsafeBytes { n in
                    tag.withUnsafeMutableBytes { t in
                        CTokengateShims_aes256gcm_seal(
                            self.key.baseAddress, n.baseAddress, nil, 0, p.baseAddress, p.count, c.baseAddress,
                            t.baseAddress)
                    }
                }
            }
        }
        return ok == 1 ? (ciphertext, nonce, tag) : nil
    }
}
