//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Why the client library refused something. Compare by ``code``; the message is for people and never holds a
/// token.
public struct TokengateClientError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A stable code. New codes may be added; switch with a fallback.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String

        private init(_ name: String) {
            self.name = name
        }

        public var description: String { self.name }

        /// The site said no: the user canceled or access was denied (`status=unauthorized`, `error=…`).
        public static let unauthorized = Code("unauthorized")
        /// A callback URL that is neither a token nor an error, or is broken (bad escapes, a bad expiry,
        /// a parameter twice, a `token_type` other than bearer).
        public static let malformedCallback = Code("malformed_callback")
        /// The callback's `state` is not the one this app sent: someone else started that login.
        public static let stateMismatch = Code("state_mismatch")
        /// Asked to put a token in a URL, or the request's URL already holds it.
        public static let tokenInURL = Code("token_in_url")
        /// Not `https` (plain `http` is allowed to loopback hosts only, for development).
        public static let insecureURL = Code("insecure_url")
        /// A URL or URL part that cannot be used (a query on the site URL, a bad app name, …).
        public static let invalidURL = Code("invalid_url")
        /// The token cannot go into this request that way (a form field on a GET, a JSON body, a stream).
        public static let cannotAttach = Code("cannot_attach")
        /// The request already carries a token (two tokens are refused by the gateway).
        public static let alreadyAttached = Code("already_attached")
        /// The stored token has expired: start over at the token page.
        public static let tokenExpired = Code("token_expired")
        /// The callback holds a PKCE code, not a token: read it with
        /// ``TokenCapture/deliveryFromCallback(_:callback:expectedState:now:)`` and redeem it (``CodeRedemption``).
        public static let codeNeedsRedemption = Code("code_needs_redemption")
        /// The site refused to redeem a PKCE code (`invalid_grant` and the like: expired, wrong verifier,
        /// revoked). The site's `error_description` is in ``TokengateClientError/serverMessage``. Start over at
        /// the token page with a new verifier.
        public static let redemptionRefused = Code("redemption_refused")
        /// The site's answer to a redemption is not the JSON token answer it should be.
        public static let malformedResponse = Code("malformed_response")
        /// The refresh token was refused (`invalid_grant`: revoked, used before, expired) or there is none: the
        /// user must log in again at the token page.
        public static let loginRequired = Code("login_required")
    }

    public let code: Code
    public let message: String
    /// For ``Code/unauthorized`` and ``Code/redemptionRefused``: the site's own message (`message` or `error_description`), printable and at
    /// most 200 characters. Text from a URL: show it, never interpret it.
    public let serverMessage: String?

    init(_ code: Code, _ message: String, serverMessage: String? = nil) {
        self.code = code
        self.message = message
        self.serverMessage = serverMessage
    }

    public var description: String { "\(self.code): \(self.message)" }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
    }
}
