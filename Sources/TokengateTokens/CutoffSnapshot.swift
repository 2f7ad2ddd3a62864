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

    /// Why a token of `kind` for `subject`, issued at `issuedAt`, is dead, or `nil`: issued before the global
    /// cutoff or the user's (`revoked`), or, for an api token, before the user's api cutoff (`api_revoked`). A
    /// token issued at a cutoff's very second lives. The one rule for every check: the verifier's, and the token
    /// page's redemption of a PKCE code (which is as good as a token issued when the code was).
    @inline(__always)
    public func revocation(subject: String, issuedAt: Int64, kind: TokenKind) -> RejectionReason? {
        if let global = self.globalRevokedBefore, issuedAt < global { return .revoked }
        // Most snapshots of a small site hold no user at all: no hashing then.
        guard !self.users.isEmpty, let user = self.users[CutoffUserKey(subject)] else { return nil }
        if let revokedBefore = user.revokedBefore, issuedAt < revokedBefore { return .revoked }
        if kind == .api, let apiRevokedBefore = user.apiRevokedBefore, issuedAt < apiRevokedBefore {
            return .apiRevoked
        }
        return nil
    }
}
