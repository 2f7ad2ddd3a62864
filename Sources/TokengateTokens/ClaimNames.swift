//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The payload member names tokengate reads for the user, the issue time and the api-only flag.
/// `exp`, `nbf`, `iss` and `aud` keep their registered names (RFC 7519 §4.1).
public struct ClaimNames: Sendable, Hashable {
    public var user: String
    public var issuedAt: String
    public var apiOnly: String

    public init(user: String = "sub", issuedAt: String = "iat", apiOnly: String = "api_only") {
        self.user = user
        self.issuedAt = issuedAt
        self.apiOnly = apiOnly
    }
}
