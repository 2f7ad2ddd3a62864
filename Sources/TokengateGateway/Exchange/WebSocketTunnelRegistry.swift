//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateTokens

/// The open WebSocket tunnels of one event loop, and the sweep that ends those past their idle timeout or
/// lifetime or whose user's tokens (or device) were revoked since they opened.
///
/// A tunnel outlives the token check of its upgrade request by hours, so a password change or a lost phone
/// must reach it: the sweep runs every ``sweepInterval`` while at least one tunnel is open (none otherwise:
/// the request path never sees it) and checks each tunnel's identity against the cutoff snapshot only when
/// a new snapshot was published, with the one rule the verifier uses
/// (``CutoffSnapshot/revocation(subject:issuedAt:kind:device:)``). A revocation is in the snapshot as soon
/// as the cutoff sync or the admin API stored it, so an open tunnel closes within one interval of that.
final class WebSocketTunnelRegistry {
    static let sweepInterval = TimeAmount.milliseconds(250)

    private let eventLoop: any EventLoop
    private var tunnels: [ObjectIdentifier: WebSocketTunnel] = [:]
    private var perRoute: [Int: Int] = [:]
    private var sweep: RepeatedTask?
    private var cursor: UInt = 0

    init(eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    var count: Int { self.tunnels.count }

    /// The target the next tunnel of an upstream connects to: round-robin over the loop's tunnels.
    func nextTarget(count: Int) -> Int {
        self.cursor &+= 1
        return Int(self.cursor % UInt(max(count, 1)))
    }

    /// Whether the route may open one more tunnel on this loop.
    func hasRoom(route: Int, limit: Int) -> Bool {
        self.perRoute[route, default: 0] < limit
    }

    func add(_ tunnel: WebSocketTunnel, cutoffs: CutoffSnapshotHolder) {
        self.tunnels[ObjectIdentifier(tunnel)] = tunnel
        self.perRoute[tunnel.routeIndex, default: 0] += 1
        if self.sweep == nil {
            self.sweep = self.eventLoop.scheduleRepeatedTask(
                initialDelay: Self.sweepInterval, delay: Self.sweepInterval
            ) { [self] _ in
                self.sweepNow(cutoffs: cutoffs.load(), now: .now())
            }
        }
    }

    func remove(_ tunnel: WebSocketTunnel) {
        guard self.tunnels.removeValue(forKey: ObjectIdentifier(tunnel)) != nil else { return }
        self.perRoute[tunnel.routeIndex, default: 1] -= 1
        if self.tunnels.isEmpty {
            self.sweep?.cancel()
            self.sweep = nil
        }
    }

    /// Ends the tunnels that must end now; see the type's overview.
    func sweepNow(cutoffs: CutoffSnapshot, now: NIODeadline) {
        var ending: [(WebSocketTunnel, WebSocketTunnel.CloseReason)] = []
        for tunnel in self.tunnels.values {
            if let reason = Self.reasonToEnd(tunnel, cutoffs: cutoffs, now: now) {
                ending.append((tunnel, reason))
            }
        }
        for (tunnel, reason) in ending {
            tunnel.close(reason)
        }
    }

    static func reasonToEnd(_ tunnel: WebSocketTunnel, cutoffs: CutoffSnapshot, now: NIODeadline) -> WebSocketTunnel.CloseReason? {
        if tunnel.checkedCutoffs !== cutoffs {
            tunnel.checkedCutoffs = cutoffs
            if let identity = tunnel.identity,
                let rejection = cutoffs.revocation(
                    subject: identity.subject, issuedAt: identity.issuedAt, kind: identity.kind, device: identity.device)
            {
                return rejection == .deviceRevoked ? .deviceRevoked : .revoked
            }
        }
        if now - tunnel.opened >= tunnel.maxLifetime { return .maxLifetime }
        if now - tunnel.lastActivity >= tunnel.idleTimeout { return .idleTimeout }
        return nil
    }

    /// A graceful shutdown or the loop's end: every tunnel closes.
    func closeAll() {
        for tunnel in Array(self.tunnels.values) {
            tunnel.close(.shutdown)
        }
    }
}

@available(*, unavailable)
extension WebSocketTunnelRegistry: Sendable {}
