//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// User events fired inbound by ``TLSHandler``.
public enum TLSUserEvent: Sendable, Hashable {
    /// The handshake finished; application data can flow.
    ///
    /// - `negotiatedProtocol`: the ALPN protocol (`"http/1.1"`, later `"h2"`), or `nil` when the peer sent no
    ///   ALPN or nothing overlapped and the configuration allowed continuing (HTTP/1.1 then).
    /// - `serverName`: server side, the SNI host name the client sent, lowercased, or `nil` without SNI;
    ///   client side, the host name this handler sent.
    /// - `version`: `"TLSv1.2"` or `"TLSv1.3"`.
    case handshakeCompleted(negotiatedProtocol: String?, serverName: String?, version: String)
    /// close_notify went both ways (or ours answered the peer's); the channel closes next.
    case shutdownCompleted
}
