//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import TokengateConfig
import TokengatePercentEncoding
import TokengateTokens
import TokengateHTTP

/// A token page request, read and checked: the method, the same-site return address and the query
/// parameters the page understands.
///
/// Query parameters (all optional, each at most once; others are ignored):
/// - `app=NAME`: deliver the token by a redirect to that registered app's callback instead of the page;
/// - `cancel=1` (with `app`): the user declined; redirect to the callback with `status=unauthorized`;
/// - `state=…` (with `app`): an opaque value the app chose, echoed in the callback so the app can tell its own
///   request from one it never made (1–256 characters of `A-Z a-z 0-9 - . _ ~`);
/// - `code_challenge=C&code_challenge_method=S256` (with `app`): PKCE (RFC 7636); the callback then gets a code
///   to redeem with the verifier instead of the token. Only `S256` is accepted, and it must be said: RFC 7636
///   reads a missing method as `plain`, which would put the verifier itself through the browser. An app with
///   `pkce: required` must send a challenge (a cancel needs none).
struct TokenPageRequest: Sendable, Equatable {
    static let maximumStateLength = 256
    static let maximumQueryLength = 4096

    var isHead: Bool
    /// The request target as received, when it is a same-site path; the login page sends the browser back
    /// here. `nil` when it is not (the page then refuses to redirect to the login).
    var returnAddress: String?
    var app: TokenPageApp?
    var cancel: Bool
    var state: String?
    /// PKCE: present when the app sent a valid `S256` challenge.
    var challenge: CodeChallenge?

    /// Why a request cannot be served; each maps to a fixed answer.
    enum Refusal: Sendable, Equatable {
        case method
        case badQuery
        case unknownApp
        case cancelWithoutApp
        case stateWithoutApp
        case badState
        /// `code_challenge` or `code_challenge_method` without `app`.
        case challengeWithoutApp
        /// A method other than `S256` (or none), or a challenge that is not 43 characters of base64url.
        case badChallenge
        /// The app has `pkce: required` and the request has no challenge.
        case challengeRequired
    }

    enum Parsed: Sendable, Equatable {
        case request(TokenPageRequest)
        case refused(Refusal)
    }

    static func parse(_ head: HTTPRequestHead, apps: [TokenPageApp]) -> Parsed {
        switch head.method {
        case .GET: Self.parse(target: head.uri, isHead: false, apps: apps)
        case .HEAD: Self.parse(target: head.uri, isHead: true, apps: apps)
        default: .refused(.method)
        }
    }

    /// The query of `uri` read as the page reads a `GET`'s; also the query of a confirmation's `POST`
    /// (``TokenPageConfirmationRequest``), which carries the same parameters.
    static func parse(target uri: String, isHead: Bool, apps: [TokenPageApp]) -> Parsed {
        let query: Substring
        if let mark = uri.firstIndex(of: "?") {
            query = uri[uri.index(after: mark)...]
        } else {
            query = ""
        }
        guard query.utf8.count <= Self.maximumQueryLength else { return .refused(.badQuery) }

        var seen: [String: String] = [:]
        for pair in FormURLEncoded.pairs(Array(query.utf8)) where Self.parameters.contains(pair.name) {
            // A parameter given twice is ambiguous (which app? which state?): refuse rather than pick one.
            guard seen[pair.name] == nil, let value = FormURLEncoded.decode(pair.rawValue) else {
                return .refused(.badQuery)
            }
            seen[pair.name] = value
        }
        let appName = seen["app"]
        let cancel = seen["cancel"]
        let state = seen["state"]
        let challengeText = seen["code_challenge"]
        let challengeMethod = seen["code_challenge_method"]

        var app: TokenPageApp?
        if let appName {
            // Exact match against the configured list; the callback always comes from configuration.
            guard let registered = apps.first(where: { $0.name == appName }) else { return .refused(.unknownApp) }
            app = registered
        }
        let isCancel: Bool
        switch cancel {
        case nil: isCancel = false
        case "1": isCancel = true
        case .some: return .refused(.badQuery)
        }
        if isCancel && app == nil { return .refused(.cancelWithoutApp) }
        if let state {
            guard app != nil else { return .refused(.stateWithoutApp) }
            guard (1...Self.maximumStateLength).contains(state.utf8.count),
                state.utf8.allSatisfy(PercentEncoding.isUnreserved)
            else { return .refused(.badState) }
        }
        var challenge: CodeChallenge?
        if challengeText != nil || challengeMethod != nil {
            guard app != nil else { return .refused(.challengeWithoutApp) }
            guard challengeMethod == "S256", let text = challengeText, let parsed = CodeChallenge(text) else {
                return .refused(.badChallenge)
            }
            challenge = parsed
        } else if let app, app.pkce == .required, !isCancel {
            return .refused(.challengeRequired)
        }
        return .request(
            TokenPageRequest(
                isHead: isHead,
                returnAddress: SameSiteReturnPath.validate(uri),
                app: app,
                cancel: isCancel,
                state: state,
                challenge: challenge
            )
        )
    }

    private static let parameters: Set<String> = ["app", "cancel", "state", "code_challenge", "code_challenge_method"]
}
