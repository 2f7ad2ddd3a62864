//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// One prepared way to check a signature: an HMAC key with precomputed pads, or a public key with a
/// prepared digest-verify context. Built once per key and algorithm at load time.
///
/// `@unchecked Sendable`: the C object is immutable after construction and the functions called on the
/// hot path (`CTokengateShims_hmac_verify`, `CTokengateShims_verifier_verify`) only read it, as their
/// header documents; it is freed in `deinit`, when no thread can hold a reference any more.
final class SignatureCheck: @unchecked Sendable {
    private enum Storage {
        case hmac(OpaquePointer)
        case publicKey(OpaquePointer)
    }

    private let storage: Storage

    /// An HMAC check; `bits` is 256, 384 or 512.
    init?(hmacBits bits: Int, secret: [UInt8]) {
        guard let key = secret.withUnsafeBytes({ CTokengateShims_hmac_key_new(Int32(bits), $0.baseAddress, $0.count) })
        else { return nil }
        self.storage = .hmac(key)
    }

    /// A public-key check for an asymmetric algorithm. Nil when the key does not fit the algorithm.
    init?(publicKey: PKey, algorithm: TokenAlgorithm) {
        guard let scheme = algorithm.shimScheme,
            let verifier = CTokengateShims_verifier_new(publicKey.pointer, scheme)
        else { return nil }
        self.storage = .publicKey(verifier)
    }

    deinit {
        switch self.storage {
        case .hmac(let key): CTokengateShims_hmac_key_free(key)
        case .publicKey(let verifier): CTokengateShims_verifier_free(verifier)
        }
    }

    /// Whether `signature` is valid for `data`. Allocation-free for HMAC.
    @inline(__always)
    func verify(data: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer) -> Bool {
        switch self.storage {
        case .hmac(let key):
            return CTokengateShims_hmac_verify(
                key,
                data.baseAddress,
                data.count,
                signature.baseAddress,
                signature.count
            )
                == 1
        case .publicKey(let verifier):
            return CTokengateShims_verifier_verify(
                verifier,
                data.baseAddress,
                data.count,
                signature.baseAddress,
                signature.count
            ) == 1
        }
    }

    /// The full HMAC tag (tests and signing only). Nil for a public-key check.
    func hmacTag(_ data: [UInt8]) -> [UInt8]? {
        guard case .hmac(let key) = self.storage else { return nil }
        var tag = [UInt8](repeating: 0, count: CTokengateShims_hmac_tag_length(key))
        data.withUnsafeBytes { d in
            tag.withUnsafeMutableBytes { t in CTokengateShims_hmac_compute(key, d.baseAddress, d.count, t.baseAddress) }
        }
        return tag
    }
}
