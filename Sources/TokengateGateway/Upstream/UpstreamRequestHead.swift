//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateTokens
import TokengateHTTP

/// A request head as the backend gets it, checked and ready to write (``RequestRewriter/upstreamHead(from:identity:strip:withheldCookies:newBodyLength:forwarding:)``),
/// with what the upstream connection must know to frame the body and read the response.
///
/// Kept for the exchange's lifetime as what the bytes are made of, not as the bytes: the upstream connection
/// writes it into a buffer of its own when the request goes out (``UpstreamResponseHandler/send(_:)``), which
/// the same connection's next request writes into again, and a retry on a fresh connection writes it again.
struct UpstreamRequestHead {
    let client: ClientRequestHead
    let identity: VerifiedToken?
    /// Where the token was, when the route takes it out.
    let strip: TokenSource?
    /// Cookies the route never forwards (``GatewayRoute/withheldCookies``).
    let withheldCookies: [String]
    /// The route's `forward_claims` headers (``GatewayRoute/forwardedClaimHeaders``): the client's are removed,
    /// and the identity's values written under them.
    var forwardedClaimHeaders: [String] = []
    /// The body's length when the gateway changed the body (a token taken out of a form).
    let newBodyLength: Int?
    /// The client's `Content-Length` as the number it was read as (`nil` with ``newBodyLength``): written anew,
    /// never as the client's bytes (leading zeros).
    let clientLength: Int?
    let forwarding: RequestRewriter.Forwarding
    /// The head says `transfer-encoding: chunked` (a body of unknown length): body parts go as chunks.
    let chunked: Bool
    /// The head says `connection: close`: the upstream does not keep connections (`keep_alive: false`).
    let closeConnection: Bool
    /// The upstream's `secret_header`: a client's field of that name is dropped, the gateway's own added.
    let secretHeader: UpstreamSecretHeader?

    var method: HTTPMethod { self.client.method }

    /// Room for the head: at least the request line, the client's lines and what the gateway adds.
    var sizeHint: Int { 256 + self.client.uri.utf8.count + self.client.fields.bytes.count }

    /// Request line, fields and the empty line, appended to `bytes`.
    func write(into bytes: inout ByteBuffer) {
        RequestRewriter.write(self, into: &bytes)
    }
}
