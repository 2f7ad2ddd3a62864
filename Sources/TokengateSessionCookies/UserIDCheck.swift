//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// The rules a JWT's user claim must meet (``UserIDRules``), applied to a session's user id: it goes into the
/// same header, logs and cutoff lookups.
enum UserIDCheck {
    static func isUsable(_ bytes: UnsafeRawBufferPointer) -> Bool {
        UserIDRules.problem(bytes.assumingMemoryBound(to: UInt8.self)) == nil
    }
}
