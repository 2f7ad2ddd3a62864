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
    /// The generation of its current refresh token (``RefreshTokenKey``); nil for a device without refresh tokens.
    public var refreshGeneration: Int64?
    /// Until when its current refresh token may be used.
    public var refreshExpiresAt: Int64?

    /// The app name of a token delivered by the page itself rather than to a registered app.
    public static let copiedByHand = "copied by hand"

    public init(
        device: DeviceID,
        user: String,
        app: String,
        createdAt: Int64,
        tokensExpireBy: Int64?,
        lastUsedAt: Int64? = nil,
        revokedAt: Int64? = nil,
        refreshGeneration: Int64? = nil,
        refreshExpiresAt: Int64? = nil
    ) {
        self.refreshGeneration = refreshGeneration
        self.refreshExpiresAt = refreshExpiresAt
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
    /// Rotates a device's refresh token (``RefreshRotation``); nil when the store cannot (then no app gets refresh
    /// tokens).
    public let refresh: (@Sendable (RefreshRotation) async throws -> RefreshOutcome)?
    /// What the connected-apps page does for a logged-in user (``DeviceChanges``); nil when nothing serves it.
    public let changes: DeviceChanges?

    public init(
        record: @escaping @Sendable (DeviceRecord) async throws -> Void,
        refresh: (@Sendable (RefreshRotation) async throws -> RefreshOutcome)? = nil,
        changes: DeviceChanges? = nil
    ) {
        self.record = record
        self.refresh = refresh
        self.changes = changes
    }
}

/// The store's operations behind the connected-apps page, each for the one user the page's login check named:
/// the page never names another user, so a device id from another account is simply not found.
public struct DeviceChanges: Sendable {
    /// The user's devices as stored (revoked ones too), at most the store's listing bound.
    public let list: @Sendable (_ user: String) async throws -> [DeviceRecord]
    /// Revokes one device of the user now, stored and published before it returns; nil when the user has no such
    /// device.
    public let revoke: @Sendable (_ user: String, _ device: DeviceID) async throws -> DeviceRecord?
    /// "Disable mobile apps": the user's api-token cutoff moves to now, stored and published before it returns.
    public let disableMobileApps: @Sendable (_ user: String) async throws -> Void

    public init(
        list: @escaping @Sendable (_ user: String) async throws -> [DeviceRecord],
        revoke: @escaping @Sendable (_ user: String, _ device: DeviceID) async throws -> DeviceRecord?,
        disableMobileApps: @escaping @Sendable (_ user: String) async throws -> Void
    ) {
        self.list = list
        self.revoke = revoke
        self.disableMobileApps = disableMobileApps
    }
}

/// One use of a refresh token, as the store rotates it: the device and generation the token names, and what the
/// next generation gets.
public struct RefreshRotation: Sendable, Hashable {
    public var device: DeviceID
    public var generation: Int64
    /// The app that presents it (`client_id`): a device's refresh token is its app's only.
    public var app: String
    public var now: Int64
    /// The next refresh token's expiry.
    public var refreshExpiresAt: Int64
    /// The new access token's `exp`: the device's ``DeviceRecord/tokensExpireBy`` moves to it.
    public var accessExpiresAt: Int64

    public init(device: DeviceID, generation: Int64, app: String, now: Int64, refreshExpiresAt: Int64, accessExpiresAt: Int64) {
        self.device = device
        self.generation = generation
        self.app = app
        self.now = now
        self.refreshExpiresAt = refreshExpiresAt
        self.accessExpiresAt = accessExpiresAt
    }
}

/// What the store did with a ``RefreshRotation``.
public enum RefreshOutcome: Sendable, Hashable {
    /// The token was current: the device's generation moved on (the record as it is now).
    case rotated(DeviceRecord)
    /// An earlier generation: the token was used before. The device is revoked now (RFC 9700 §4.14.2).
    case reused(DeviceRecord)
    /// No such device with refresh tokens, another app's, a revoked device, or an expired token.
    case refused(RefreshRefusal)
}

public enum RefreshRefusal: String, Sendable, Hashable {
    case unknownDevice = "unknown_device"
    case wrongApp = "wrong_app"
    case revoked
    case expired
}
