//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// Owns one libcrypto `EVP_PKEY` built at load time.
///
/// `@unchecked Sendable`: the key is never mutated after construction; libcrypto allows concurrent
/// read-only use of an `EVP_PKEY` (signing and verifying create their own contexts), and the reference is
/// released in `deinit`, when no other thread can still use it.
final class PKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(taking pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        CTokengateShims_pkey_free(self.pointer)
    }

    /// The key's kind and size; `passesCheck` is libcrypto's public-key validation.
    func describe() -> (kind: Int32, bits: Int32, passesCheck: Bool) {
        var kind: Int32 = 0
        var bits: Int32 = 0
        let ok = CTokengateShims_pkey_describe(self.pointer, &kind, &bits)
        return (kind, bits, ok == 1)
    }

    func bigNumber(_ name: String, padTo: Int = 0) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 1024)
        var length = 0
        let ok = out.withUnsafeMutableBytes { buffer in
            CTokengateShims_pkey_get_bn(self.pointer, name, buffer.baseAddress, buffer.count, &length, padTo)
        }
        guard ok == 1 else { return nil }
        return Array(out[0..<length])
    }

    func raw(privatePart: Bool) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 64)
        var length = 0
        let ok = out.withUnsafeMutableBytes { buffer in
            CTokengateShims_pkey_get_raw(self.pointer, privatePart ? 1 : 0, buffer.baseAddress, buffer.count, &length)
        }
        guard ok == 1 else { return nil }
        return Array(out[0..<length])
    }
}
