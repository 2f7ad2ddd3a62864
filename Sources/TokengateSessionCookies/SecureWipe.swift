//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// Wipes derived key bytes once the key object that needs them holds its own copy.
enum SecureWipe {
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { CTokengateShims_cleanse($0.baseAddress, $0.count) }
    }
}
