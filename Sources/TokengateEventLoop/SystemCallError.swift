//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which one, and `errno` right after it.
public struct SystemCallError: Error, CustomStringConvertible {
    public let call: String
    public let code: Int32

    /// Captures `errno` now: create it right after the failing call.
    public init(_ call: String, code: Int32 = errno) {
        self.call = call
        self.code = code
    }

    public var description: String {
        "\(self.call): \(String(cString: strerror(self.code)))"
    }
}
