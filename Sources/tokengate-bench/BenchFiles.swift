//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// Output files of the bench's helpers. Tokens are bearer credentials (even test ones), so files are 0600.
enum BenchFiles {
    static func writePrivate(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        else {
            throw BenchError("unwritable", "cannot write \(path)")
        }
    }
}
