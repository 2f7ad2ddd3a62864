//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

// MARK: The check endpoint's own refusals (a front proxy's checks; the token answers are the usual ones).

extension GatewayAnswer {
    /// 403: a check from a peer that is not one of the listener's `trusted_peers`. Its forwarded method, target
    /// and host are not believed, so there is nothing to check.
    package static func untrustedPeer() -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "forbidden",
            description: "checks are answered only for the configured front proxies",
            reasonCode: "untrusted_peer"
        )
    }

    /// 400: the check request lacks (or repeats) a field the listener's header shape needs, or one holds what
    /// no request line could. A front proxy's configuration error, never the client's: nginx turns it into a 500.
    package static func checkMalformed(_ description: String) -> Self {
        GatewayAnswer(status: .badRequest, error: "invalid_request", description: description, reasonCode: "check_malformed")
    }

    /// 403: the front proxy says its client spoke plain HTTP. Tokens travel only over TLS; a proxied request
    /// gets 426 for this, which the front proxies do not pass on (nginx's `auth_request` knows 401 and 403).
    package static func checkTLSRequired() -> Self {
        GatewayAnswer(
            status: .forbidden,
            error: "tls_required",
            description: "this service is only available over HTTPS",
            reasonCode: "tls_required"
        )
    }
}
