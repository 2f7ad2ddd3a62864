//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The checks that apply to a session cookie as to a JWT: the session max-age counted from the login time, and
/// the tolerated clock difference between the site and the gateway.
public struct SessionCookiePolicy: Sendable, Hashable {
    /// A `session` login expires this many seconds after its login time.
    public var sessionMaxAge: Int64
    /// Tolerated clock difference, applied to the login time, the format's own time and every expiry.
    public var clockSkew: Int64

    public init(sessionMaxAge: Int64 = 14 * 86_400, clockSkew: Int64 = 60) {
        self.sessionMaxAge = sessionMaxAge
        self.clockSkew = clockSkew
    }
}
