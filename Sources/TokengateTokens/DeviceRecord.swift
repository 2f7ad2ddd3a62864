//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One device (an installation of an app) as the cutoff store records it: made when the token page mints the
/// device's first token, listed by the admin API, revoked by the CLI and the admin API.
public struct DeviceRecord: Sendable, Hashable {
    public var device: DeviceID
    public var user: String
    /// The registered app the token went to, or ``copiedByHand`` for the page's own delivery (a token the user
    /// copied from the page or a browser cookie).
    public var app: String
    /// When the first token was minted, UNIX seconds.
    public var createdAt: Int64
    /// The latest `exp` of the tokens minted for it; nil when one has none.
    public var tokensExpireBy: Int64?
    /// When it was last given a token (its first, or a refresh).
    public var lastUsedAt: Int64?
    /// When it was revoked, or nil.
    public var revokedAt: Int64?

    /// The app name of a token delivered by the page itself rather than to a registered app.
    public static let copiedByHand = "copied by hand"

    public init(
        device: DeviceID,
        user: String,
        app: String,
        createdAt: Int64,
        tokensExpireBy: Int64?,
        lastUsedAt: Int64? = nil,
        revokedAt: Int64? = nil
    ) {
        self.device = device
        self.user = user
        self.app = app
        self.createdAt = createdAt
        self.tokensExpireBy = tokensExpireBy
        self.lastUsedAt = lastUsedAt ?? createdAt
        self.revokedAt = revokedAt
    }
}

/// How the token page has a device record made durable before it hands the device's first token over: the
/// gateway's cutoff store (through its sync service), or nothing when the store keeps no devices (the JSON file),
/// and then tokens carry no device.
public struct DeviceRegistry: Sendable {
    public let record: @Sendable (DeviceRecord) async throws -> Void

    public init(record: @escaping @Sendable (DeviceRecord) async throws -> Void) {
        self.record = record
    }
}
