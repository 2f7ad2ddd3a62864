//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// Reads PEM public keys through libcrypto (load time only).
enum PEMReader {
    static func publicKey(_ pem: String) -> PKey? {
        var text = Array(pem.utf8)
        guard let pointer = text.withUnsafeMutableBytes({ CTokengateShims_pkey_from_pem($0.baseAddress, $0.count) })
        else { return nil }
        return PKey(taking: pointer)
    }
}
