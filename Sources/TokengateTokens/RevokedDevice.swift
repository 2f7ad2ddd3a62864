//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A revoked device as the snapshot holds it: whose it was, when it was revoked, and until when a token of it
/// could still be alive (for pruning, ``isDead(userCutoffs:now:clockSkew:)``).
///
/// 48 bytes inline in the persistent map's nodes (the user key's 16, three times).
public struct RevokedDevice: Sendable, Hashable {
    /// The device's user (every token of the device is this user's).
    public var user: CutoffUserKey
    /// When it was revoked, UNIX seconds. No token of it is minted after this: the token page and the refresh
    /// check the device first.
    public var revokedAt: Int64
    /// The latest `exp` of any token minted for the device, or nil when one of them has none (then only a user
    /// cutoff after the revocation makes the entry unneeded).
    public var tokensExpireBy: Int64?

    public init(user: CutoffUserKey, revokedAt: Int64, tokensExpireBy: Int64?) {
        self.user = user
        self.revokedAt = revokedAt
        self.tokensExpireBy = tokensExpireBy
    }

    /// Whether every token of the device is dead without the entry: each was issued at or before ``revokedAt``,
    /// so a user cutoff (password or "disable mobile apps": the device's tokens are api tokens) later than that,
    /// or the clock past the last `exp` and the skew, kills them all anyway.
    public func isDead(userCutoffs: UserCutoffs?, globalRevokedBefore: Int64?, now: Int64, clockSkew: Int64) -> Bool {
        if let global = globalRevokedBefore, global > self.revokedAt { return true }
        if let cutoffs = userCutoffs {
            if let cutoff = cutoffs.revokedBefore, cutoff > self.revokedAt { return true }
            if let cutoff = cutoffs.apiRevokedBefore, cutoff > self.revokedAt { return true }
        }
        if let expiry = self.tokensExpireBy, now - clockSkew >= expiry { return true }
        return false
    }
}
