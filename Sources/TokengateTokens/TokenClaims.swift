//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The claims ``TokenSigner`` puts in a token.
public struct TokenClaims: Sendable, Hashable {
    public var subject: String
    public var issuedAt: Int64
    public var apiOnly: Bool
    public var expiresAt: Int64?
    public var notBefore: Int64?
    public var issuer: String?
    public var audience: String?
    /// The device the token is for (the `did` claim); nil for a token of no device.
    public var device: DeviceID?

    public init(
        subject: String,
        issuedAt: Int64,
        apiOnly: Bool,
        expiresAt: Int64? = nil,
        notBefore: Int64? = nil,
        issuer: String? = nil,
        audience: String? = nil,
        device: DeviceID? = nil
    ) {
        self.subject = subject
        self.issuedAt = issuedAt
        self.apiOnly = apiOnly
        self.expiresAt = expiresAt
        self.notBefore = notBefore
        self.issuer = issuer
        self.audience = audience
        self.device = device
    }
}
