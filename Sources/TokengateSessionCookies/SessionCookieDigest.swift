//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL

/// The hash functions the frameworks sign and derive keys with.
///
/// SHA-1 is here because it is what itsdangerous (Flask), keygrip (Express) and Rails' signed cookies still use
/// by default, and what Rails 6.1 derives its keys with. As an HMAC or PBKDF2 hash it has no known weakness
/// (collisions do not help forge an HMAC); the configuration picks SHA-256 wherever the site does.
public enum SessionCookieDigest: String, Sendable, Hashable, CaseIterable {
    case sha1 = "SHA1"
    case sha256 = "SHA256"

    /// The digest's length in bytes, which is also the HMAC tag's.
    var length: Int {
        switch self {
        case .sha1: 20
        case .sha256: 32
        }
    }

    /// The bit count the C HMAC object takes.
    var hmacBits: Int32 {
        switch self {
        case .sha1: 160
        case .sha256: 256
        }
    }

    /// libcrypto's method (load time only: PBKDF2 and the one-shot digests of key derivation).
    var evp: OpaquePointer? {
        switch self {
        case .sha1: EVP_sha1()
        case .sha256: EVP_sha256()
        }
    }

    /// The digest of `bytes` (load time only). Nil when libcrypto fails.
    func hash(_ bytes: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: self.length)
        var size: UInt32 = 0
        let ok = bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { output in
                EVP_Digest(input.baseAddress, input.count, output.baseAddress, &size, self.evp, nil)
            }
        }
        guard ok == 1, Int(size) == self.length else {
            ERR_clear_error()
            return nil
        }
        return out
    }

    /// PBKDF2-HMAC with this digest (RFC 8018 §5.2), as `OpenSSL::PKCS5.pbkdf2_hmac` computes it for Rails'
    /// `ActiveSupport::KeyGenerator`. Load time only: with Rails' 1000 iterations it costs a few milliseconds.
    func pbkdf2(secret: [UInt8], salt: [UInt8], iterations: Int, length: Int) -> [UInt8]? {
        guard iterations > 0, iterations <= Int(Int32.max), length > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        let ok = secret.withUnsafeBytes { s in
            salt.withUnsafeBytes { a in
                out.withUnsafeMutableBytes { o in
                    PKCS5_PBKDF2_HMAC(
                        s.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(s.count),
                        a.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(a.count), Int32(iterations),
                        self.evp, Int32(length), o.baseAddress?.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard ok == 1 else {
            ERR_clear_error()
            return nil
        }
        return out
    }
}
