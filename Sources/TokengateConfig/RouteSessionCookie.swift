//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// A route's `session_cookie:`: the site whose own login cookie the route accepts as a token, and where it is
/// read (the issuer's cookie by default, or a header a client copies it into).
///
/// A token found in one of these sources is checked as that site's cookie; one found in the route's other
/// `sources` is still a JWT. Either way the route's answers, identity headers, stripping, CSRF rule and cutoffs
/// are the same: a cookie source on a cross-site unsafe request is refused, and two tokens are one too many.
public struct RouteSessionCookie: Sendable, Equatable {
    /// The name of an item of `issuers:` with `kind: session_cookie`.
    public var issuer: String
    /// `cookie:NAME` or `header:NAME` only.
    public var sources: [TokenSource]

    public init(issuer: String, sources: [TokenSource]) {
        self.issuer = issuer
        self.sources = sources
    }
}
