//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

/// What ``CutoffStore/changes(since:limit:)`` read, in one consistent read: the users changed since a position,
/// and the global row as it is now.
public struct CutoffChanges: Sendable, Equatable {
    /// The global cutoff now.
    public var globalRevokedBefore: Int64?
    /// The force epoch now; a change from the enforced one means a cutoff moved back or a row was deleted, which a
    /// list of changed rows cannot express: the sync service then reloads the whole store.
    public var forceEpoch: Int64
    /// The users whose row changed after the position asked for, with their cutoffs as stored now.
    public var users: [ChangedUser]
    /// The position to ask from next time.
    public var position: CutoffFeedPosition
    /// Whether more changes than `limit` were waiting: ask again from ``position``.
    public var hasMore: Bool
    /// The devices revoked after the position asked for.
    public var revokedDevices: [(device: DeviceID, revoked: RevokedDevice)]

    public init(
        globalRevokedBefore: Int64?,
        forceEpoch: Int64,
        users: [ChangedUser],
        position: CutoffFeedPosition,
        hasMore: Bool,
        revokedDevices: [(device: DeviceID, revoked: RevokedDevice)] = []
    ) {
        self.revokedDevices = revokedDevices
        self.globalRevokedBefore = globalRevokedBefore
        self.forceEpoch = forceEpoch
        self.users = users
        self.position = position
        self.hasMore = hasMore
    }

    public static func == (lhs: CutoffChanges, rhs: CutoffChanges) -> Bool {
        lhs.globalRevokedBefore == rhs.globalRevokedBefore && lhs.forceEpoch == rhs.forceEpoch
            && lhs.users == rhs.users && lhs.position == rhs.position && lhs.hasMore == rhs.hasMore
            && lhs.revokedDevices.elementsEqual(rhs.revokedDevices, by: { $0.device == $1.device && $0.revoked == $1.revoked })
    }

    /// One changed row.
    public struct ChangedUser: Sendable, Hashable {
        public var user: CutoffUserKey
        public var cutoffs: UserCutoffs

        public init(user: CutoffUserKey, cutoffs: UserCutoffs) {
            self.user = user
            self.cutoffs = cutoffs
        }
    }
}
