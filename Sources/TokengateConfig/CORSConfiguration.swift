//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A route's cross-origin policy (`cors:`): which other sites' pages may call it from a browser, and how.
///
/// Origins are kept in their serialized form, lower-cased (`https://app.example`, `https://app.example:8443`);
/// a request's `Origin` is compared with them byte for byte after lower-casing, never by prefix or suffix, so
/// `https://app.example.evil` is not `https://app.example`. `*` allows any origin, and only without
/// credentials: a wildcard with cookies would hand every site on the web the user's session.
public struct CORSConfiguration: Sendable, Equatable {
    public var origins: [String]
    /// Upper-case method names a preflight may ask for (the CORS-safelisted `GET`, `HEAD`, `POST` always pass).
    public var methods: [String]
    /// Lower-case request header names a preflight may ask for.
    public var headers: [String]
    /// Lower-case response header names a page's script may read (`Access-Control-Expose-Headers`).
    public var exposeHeaders: [String]
    /// Whether the browser may send cookies with the request and read the response (`Access-Control-Allow-Credentials`).
    /// A route whose token is a cookie takes it on an unsafe method from these origins (and from no other site).
    public var credentials: Bool
    /// How long a browser may keep a preflight's answer (`Access-Control-Max-Age`); `nil` sends none.
    public var maxAge: Duration?

    public init(
        origins: [String],
        methods: [String] = ["GET", "HEAD", "POST"],
        headers: [String] = [],
        exposeHeaders: [String] = [],
        credentials: Bool = false,
        maxAge: Duration? = nil
    ) {
        self.origins = origins
        self.methods = methods
        self.headers = headers
        self.exposeHeaders = exposeHeaders
        self.credentials = credentials
        self.maxAge = maxAge
    }

    /// Whether any origin passes (`origins: ["*"]`).
    public var allowsAnyOrigin: Bool { self.origins.contains("*") }
}
