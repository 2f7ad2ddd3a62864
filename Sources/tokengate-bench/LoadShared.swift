//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import TokengateTLS

/// What every connection slot reads and nobody changes: the requests, the plan, where and how to connect.
struct LoadShared: Sendable {
    let pool: TokenPool
    let plan: LoadPlan
    let target: BenchTarget
    let tls: TLSClientContext
    let logger: Logger
}
