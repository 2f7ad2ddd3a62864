//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// A derived HMAC key with its pads absorbed once at load (the C object of `crypto_hmac.c`): per cookie only
/// the message and two final blocks are hashed, and nothing is allocated.
///
/// `@unchecked Sendable`: the C object is written in `init` only; `compute` and `verify` only read it (the C
/// header says so), and `deinit` frees and wipes it when no thread can hold a reference any more.
final class HMACKey: @unchecked Sendable {
    let digest: SessionCookieDigest
    private let key: OpaquePointer

    /// Nil when libcrypto is out of memory. The caller wipes `secret` (the object keeps only the pad states).
    init?(digest: SessionCookieDigest, secret: [UInt8]) {
        guard
            let key = secret.withUnsafeBytes({ CTokengateShims_hmac_key_new(digest.hmacBits, $0.baseAddress, $0.count) })
        else { return nil }
        self.digest = digest
        self.key = key
    }

    deinit {
        CTokengateShims_hmac_key_free(self.key)
    }

    var tagLength: Int { self.digest.length }

    /// Whether `tag` is the full tag of `data`, compared in constant time (`CRYPTO_memcmp`). A wrong length is
    /// refused before hashing: the length is public.
    @inline(__always)
    func verify(_ data: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer) -> Bool {
        CTokengateShims_hmac_verify(self.key, data.baseAddress, data.count, tag.baseAddress, tag.count) == 1
    }

    /// Writes the tag of `data` to `out` (``tagLength`` bytes).
    @inline(__always)
    func compute(_ data: UnsafeRawBufferPointer, into out: UnsafeMutableRawPointer) {
        CTokengateShims_hmac_compute(self.key, data.baseAddress, data.count, out)
    }

    /// The tag of `bytes` (load time and minting).
    func tag(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: self.tagLength)
        bytes.withUnsafeBytes { data in out.withUnsafeMutableBytes { self.compute(data, into: $0.baseAddress!) } }
        return out
    }
}
