//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

extension GatewayConfiguration {
    /// The settings a reload cannot apply, by key, where this configuration differs from `running`.
    ///
    /// These are used once, at start: sockets are bound (`listen` addresses and their kind, `admin`), the
    /// cutoff store is opened and synced (`cutoffs`) and the event-loop threads are made (`event_loops`). A
    /// reload that changes one of them must be refused as a whole, not half-applied: a gateway that said
    /// "reloaded" after a move to another cutoff store would go on enforcing the old store's revocations while
    /// `tokengate revoke` wrote to the new one. Everything else (routes, keys, certificates, upstreams, tokens,
    /// limits, HTTP/2, HSTS, the access log and the log level, the other listener settings) is taken from the
    /// new configuration.
    public func restartOnlyChanges(comparedTo running: GatewayConfiguration) -> [String] {
        var changed: [String] = []
        if self.listeners.map(\.restartIdentity) != running.listeners.map(\.restartIdentity) {
            changed.append("listen (addresses, or tls against plain_http)")
        }
        if self.admin != running.admin {
            changed.append("admin")
        }
        if self.cutoffs != running.cutoffs {
            changed.append("cutoffs")
        }
        if self.eventLoops != running.eventLoops {
            changed.append("event_loops")
        }
        return changed
    }
}

extension ListenerConfiguration {
    /// What a bound socket fixes: its address, whether it speaks TLS, and whether it is a check endpoint.
    fileprivate var restartIdentity: String {
        "\(self.address) \(self.tls != nil) \(self.forwardAuth.map { $0.tls != nil ? "check-tls" : "check" } ?? "-")"
    }
}
