//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The cutoffs of one user: every token of that user issued before `revokedBefore` is dead
/// (the password changed), and every *api* token issued before `apiRevokedBefore` is dead
/// ("disable mobile apps"). Times are UNIX seconds. `nil` means "no cutoff".
public struct UserCutoffs: Sendable, Hashable {
    public var revokedBefore: Int64?
    public var apiRevokedBefore: Int64?

    public init(revokedBefore: Int64? = nil, apiRevokedBefore: Int64? = nil) {
        self.revokedBefore = revokedBefore
        self.apiRevokedBefore = apiRevokedBefore
    }
}

/// An immutable view of every cutoff the gateway enforces, read by requests without locks.
///
/// Stores build a new snapshot and swap it in whole (see ``CutoffSnapshotHolder``); a snapshot
/// is never mutated after it is published, so a request that took a reference sees one
/// consistent state for its whole check.
public final class CutoffSnapshot: Sendable {
    /// Tokens of every user issued before this time are rejected (the emergency switch).
    public let globalRevokedBefore: Int64?
    /// Per-user cutoffs, keyed by the user id as it appears in the token's user claim, byte for byte
    /// (``CutoffUserKey``).
    public let users: [CutoffUserKey: UserCutoffs]
    /// A number that grows with each snapshot a store publishes; for metrics and logs.
    public let generation: UInt64

    public init(globalRevokedBefore: Int64? = nil, users: [CutoffUserKey: UserCutoffs] = [:], generation: UInt64 = 0) {
        self.globalRevokedBefore = globalRevokedBefore
        self.users = users
        self.generation = generation
    }

    /// The snapshot with no cutoffs at all.
    public static let empty = CutoffSnapshot()
}
