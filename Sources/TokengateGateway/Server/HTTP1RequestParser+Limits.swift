//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateHTTP

extension HTTP1RequestParser.Limits {
    /// The request head limits of the gateway's `limits:` section.
    init(_ limits: LimitsConfiguration) {
        self.init(maxHeadBytes: limits.maxHeaderBytes, maxURIBytes: limits.maxURIBytes)
    }
}
