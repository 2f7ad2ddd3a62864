//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Sent down every connection still open when the drain ends (`drain_timeout`, or a second signal), just before
/// the server closes it: each exchange still under way logs itself as cut by the shutdown (``ProxyExchange/drainEnded()``),
/// before the close makes it look like its client or its backend going away.
package struct GatewayDrainEndedEvent: Sendable {
    package init() {}
}
