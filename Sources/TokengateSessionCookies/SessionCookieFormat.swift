//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A web framework's own login cookie, with how that site configures it.
public enum SessionCookieFormat: Sendable, Hashable {
    case rails(RailsCookieOptions)
    case flask(FlaskSessionOptions)
    case django(DjangoSessionOptions)
    case cookieSession(CookieSessionOptions)

    /// The companion cookie a value comes with (cookie-session's `NAME.sig`), or nil.
    public var signatureCookieName: String? {
        switch self {
        case .cookieSession(let options): options.signatureCookieName
        case .rails, .flask, .django: nil
        }
    }

    /// A short name for logs and metrics: `rails`, `flask`, `django`, `cookie-session`.
    public var name: String {
        switch self {
        case .rails: "rails"
        case .flask: "flask"
        case .django: "django"
        case .cookieSession: "cookie-session"
        }
    }
}
