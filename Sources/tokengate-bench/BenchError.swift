//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A failure that ends a bench run before or instead of a report, with a stable code.
struct BenchError: Error, CustomStringConvertible {
    let code: String
    let message: String

    init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }

    var description: String { self.message }
}
