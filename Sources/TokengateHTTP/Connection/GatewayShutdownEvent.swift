//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Sent down every connection's pipeline on graceful shutdown: finish what is in flight, then close.
package struct GatewayShutdownEvent: Sendable {
    package init() {}
}
