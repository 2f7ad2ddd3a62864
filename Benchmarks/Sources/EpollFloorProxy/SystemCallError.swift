//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which one, and `errno` right after it.
struct SystemCallError: Error, CustomStringConvertible {
    let call: String
    let code: Int32

    /// Captures `errno` now: create it right after the failing call.
    init(_ call: String, code: Int32 = errno) {
        self.call = call
        self.code = code
    }

    var description: String {
        "\(self.call): \(String(cString: strerror(self.code)))"
    }
}
