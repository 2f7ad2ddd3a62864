//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Where, in the site's session, the three things tokengate needs are.
///
/// The login time is required, for every format: the time a framework keeps of its own is not the login time
/// (Flask's and Django's signing timestamps are renewed whenever the session is saved, Rails' metadata holds only
/// an expiry, cookie-session holds no time), so a cutoff compared with it would let a session that was merely
/// re-saved after the cutoff live on. The site stores the login time at login (a line or two; docs/frameworks.md).
public struct SessionCookieFields: Sendable, Hashable {
    /// The user id: a string, or an integer (rendered in decimal). E.g. `/_auth_user_id` (Django),
    /// `/_user_id` (Flask-Login), `/warden.user.user.key/0/0` (Devise), `/user_id`.
    public var userID: SessionJSONPointer
    /// The login time, seconds since 1970 as a JSON number (a fraction is dropped).
    public var loginTime: SessionJSONPointer
    /// A boolean that makes the session an `api` token when true; absent means `session`.
    public var apiOnly: SessionJSONPointer?
    /// How the minter writes the user id (frameworks whose ids are integers compare them as such).
    public var userIDType: UserIDType

    public enum UserIDType: String, Sendable, Hashable, CaseIterable {
        case string
        case integer
    }

    public init(
        userID: SessionJSONPointer,
        loginTime: SessionJSONPointer,
        apiOnly: SessionJSONPointer? = nil,
        userIDType: UserIDType = .string
    ) {
        self.userID = userID
        self.loginTime = loginTime
        self.apiOnly = apiOnly
        self.userIDType = userIDType
    }

    /// The pointers in scan order: user id, login time, then the api flag if any.
    var pointers: [SessionJSONPointer] {
        [self.userID, self.loginTime] + (self.apiOnly.map { [$0] } ?? [])
    }
}
