//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

/// Everything a store holds, as loaded in one read: the global cutoff and every user's cutoffs.
///
/// The sync service turns a table into a ``CutoffSnapshot``; it is a plain value so that merging a reload
/// with what is already enforced (``mergedForward(onto:)``) is testable without a store.
public struct CutoffTable: Sendable, Hashable {
    /// Tokens of every user issued before this time are rejected.
    public var globalRevokedBefore: Int64?
    /// Per-user cutoffs, keyed by user id: the persistent map the snapshot publishes, so the table the sync service
    /// keeps and the snapshot it published share every user the next change does not touch.
    public var users: CutoffUserMap
    /// A counter the store bumps whenever any cutoff moves to an earlier time (a forced write, or an
    /// operator's manual `UPDATE`/`DELETE`). While it stays the same, a reload may only move cutoffs
    /// forward; when it changes, the reload is taken as it is. A store without the notion keeps it at 0.
    public var forceEpoch: Int64
    /// Where the store's change feed stood when this table was read (``CutoffStore/changes(since:limit:)``): the
    /// sync service asks for the changes after it. `nil` for a store without a feed.
    public var position: CutoffFeedPosition?
    /// The devices revoked one by one whose tokens may still be alive (``CutoffSnapshot/revokedDevices``). A
    /// revocation is never undone through tokengate, so like a cutoff it only ever joins the table; the sync
    /// service takes entries out once they are no longer needed (``CutoffSyncService``, "Devices").
    public var revokedDevices: RevokedDeviceMap

    public init(
        globalRevokedBefore: Int64? = nil,
        users: CutoffUserMap = [:],
        forceEpoch: Int64 = 0,
        position: CutoffFeedPosition? = nil,
        revokedDevices: RevokedDeviceMap = [:]
    ) {
        self.globalRevokedBefore = globalRevokedBefore
        self.users = users
        self.forceEpoch = forceEpoch
        self.position = position
        self.revokedDevices = revokedDevices
    }

    /// This (newly loaded) table laid over `enforced` so that no cutoff moves backward: for each user and
    /// the global cutoff, the later of the two times wins, and a user missing from this table keeps the
    /// enforced cutoffs.
    ///
    /// This is the rule that a reload never accepts a token the last snapshot rejected: a store restored from
    /// an old backup, a JSON file edited by hand, or a read racing a write can only add rejections. Only a
    /// changed ``forceEpoch`` (an admin's explicit force) lets the caller take a table as is instead.
    public func mergedForward(onto enforced: CutoffTable) -> CutoffTable {
        var merged = enforced
        merged.forceEpoch = self.forceEpoch
        merged.position = self.position
        merged.globalRevokedBefore = Self.later(enforced.globalRevokedBefore, self.globalRevokedBefore)
        for (user, loaded) in self.users {
            merged.mergeForward(user, loaded)
        }
        for (device, revoked) in self.revokedDevices where merged.revokedDevices[device] == nil {
            merged.revokedDevices[device] = revoked
        }
        return merged
    }

    /// Lays `loaded` over the user's enforced cutoffs, the later of each winning, and changes the map only if that
    /// changes anything: a reload that finds what is already enforced copies no node of the persistent map.
    /// - Returns: whether the user's cutoffs changed.
    @discardableResult
    public mutating func mergeForward(_ user: CutoffUserKey, _ loaded: UserCutoffs) -> Bool {
        guard let current = self.users[user] else {
            self.users[user] = loaded
            return true
        }
        let merged = UserCutoffs(
            revokedBefore: Self.later(current.revokedBefore, loaded.revokedBefore),
            apiRevokedBefore: Self.later(current.apiRevokedBefore, loaded.apiRevokedBefore)
        )
        guard merged != current else {
            return false
        }
        self.users[user] = merged
        return true
    }

    /// The later of two optional cutoffs; `nil` means "no cutoff", so any time is later than it.
    static func later(_ a: Int64?, _ b: Int64?) -> Int64? {
        switch (a, b) {
        case (.none, .none): return nil
        case (.some(let a), .none): return a
        case (.none, .some(let b)): return b
        case (.some(let a), .some(let b)): return Swift.max(a, b)
        }
    }
}
