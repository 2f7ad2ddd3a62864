//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig

/// What a connection on a `forward_auth` listener tells each of its exchanges: the listener's header shape,
/// and whether the peer is one of its `trusted_peers` (decided once, when the connection arrives).
struct ForwardAuthCheck: Sendable {
    let headers: ForwardAuthHeaders
    let pathPrefix: String
    let peerTrusted: Bool

    init(headers: ForwardAuthHeaders, pathPrefix: String = "", peerTrusted: Bool) {
        self.headers = headers
        self.pathPrefix = pathPrefix
        self.peerTrusted = peerTrusted
    }

    init(settings: ForwardAuthConfiguration, peer: String?) {
        self.headers = settings.headers
        self.pathPrefix = settings.pathPrefix
        self.peerTrusted = peer.map { ip in settings.trustedPeers.contains { $0.contains(ipAddress: ip) } } ?? false
    }
}
