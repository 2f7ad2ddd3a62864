//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The cutoffs of one user: every token of that user issued before `revokedBefore` is dead
/// (the password changed), and every *api* token issued before `apiRevokedBefore` is dead
/// ("disable mobile apps"). Times are UNIX seconds. `nil` means "no cutoff".
///
/// Stored as two plain `Int64` (16 bytes, where two `Int64?` take 32 with padding): an entry of every user in the
/// snapshot, so half the bytes per user. `Int64.min` stands for "no cutoff", which is exact: no `iat` is earlier
/// than it, so a cutoff at `Int64.min` rejects nothing, as none does.
public struct UserCutoffs: Sendable, Hashable {
    @usableFromInline
    var storedRevokedBefore: Int64
    @usableFromInline
    var storedAPIRevokedBefore: Int64

    public init(revokedBefore: Int64? = nil, apiRevokedBefore: Int64? = nil) {
        self.storedRevokedBefore = revokedBefore ?? .min
        self.storedAPIRevokedBefore = apiRevokedBefore ?? .min
    }

    public var revokedBefore: Int64? {
        @inline(__always) get { self.storedRevokedBefore == .min ? nil : self.storedRevokedBefore }
        set { self.storedRevokedBefore = newValue ?? .min }
    }

    public var apiRevokedBefore: Int64? {
        @inline(__always) get { self.storedAPIRevokedBefore == .min ? nil : self.storedAPIRevokedBefore }
        set { self.storedAPIRevokedBefore = newValue ?? .min }
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
    /// (``CutoffUserKey``), in a persistent map (``CutoffUserMap``) that the next snapshot shares but for the
    /// users it changed.
    public let users: CutoffUserMap
    /// A number that grows with each snapshot a store publishes; for metrics and logs.
    public let generation: UInt64
    /// The devices revoked one by one (``DeviceID``), whose tokens may still be alive otherwise: a token whose
    /// `did` claim names one is dead (`device_revoked`). Held here, next to the cutoffs, so that a device
    /// revocation reaches every request the way a password change does: same publication, same lock-free read.
    public let revokedDevices: RevokedDeviceMap

    public init(
        globalRevokedBefore: Int64? = nil,
        users: CutoffUserMap = [:],
        generation: UInt64 = 0,
        revokedDevices: RevokedDeviceMap = [:]
    ) {
        self.globalRevokedBefore = globalRevokedBefore
        self.users = users
        self.generation = generation
        self.revokedDevices = revokedDevices
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
        // The stored fields directly: "no cutoff" is Int64.min, which no `iat` is below.
        if issuedAt < user.storedRevokedBefore { return .revoked }
        if kind == .api, issuedAt < user.storedAPIRevokedBefore { return .apiRevoked }
        return nil
    }

    /// ``revocation(subject:issuedAt:kind:)``, then the token's device (its `did` claim, nil for a token without
    /// one): a revoked device is `device_revoked`. A snapshot without revoked devices costs one count compare.
    @inline(__always)
    public func revocation(subject: String, issuedAt: Int64, kind: TokenKind, device: DeviceID?) -> RejectionReason? {
        if let reason = self.revocation(subject: subject, issuedAt: issuedAt, kind: kind) { return reason }
        if let device, !self.revokedDevices.isEmpty, self.revokedDevices[device] != nil { return .deviceRevoked }
        return nil
    }
}
