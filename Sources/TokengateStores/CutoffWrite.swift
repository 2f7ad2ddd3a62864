//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One change to a store's cutoffs, as the admin API and the `tokengate revoke` CLI ask for it.
///
/// Times are UNIX seconds. Without `force` a cutoff only moves forward: asking for an earlier time than
/// the stored one fails with ``CutoffStoreError/Code/cutoffWouldMoveBackward`` and changes nothing (asking
/// for the same time succeeds and changes nothing). With `force` the time is stored as given, even earlier,
/// which is how an admin undoes a mistaken cutoff; the store then bumps its force epoch so every instance
/// takes the earlier value instead of keeping the later one.
public enum CutoffWrite: Sendable, Hashable {
    /// The user's password changed: every token of the user issued before `at` is rejected.
    case passwordChanged(user: String, at: Int64, force: Bool)
    /// "Disable mobile apps": every *api* token of the user issued before `at` is rejected.
    case disableMobileApps(user: String, at: Int64, force: Bool)
    /// The emergency switch: every token of every user issued before `at` is rejected.
    case revokeAll(at: Int64, force: Bool)

    /// The time the write asks for.
    public var at: Int64 {
        switch self {
        case .passwordChanged(_, let at, _), .disableMobileApps(_, let at, _), .revokeAll(let at, _):
            return at
        }
    }

    /// Whether the write may move a cutoff backward.
    public var force: Bool {
        switch self {
        case .passwordChanged(_, _, let force), .disableMobileApps(_, _, let force), .revokeAll(_, let force):
            return force
        }
    }

    /// The user the write is about, or `nil` for the global cutoff.
    public var user: String? {
        switch self {
        case .passwordChanged(let user, _, _), .disableMobileApps(let user, _, _):
            return user
        case .revokeAll:
            return nil
        }
    }

    /// Checks what a store can check without a clock: a valid user id and a non-negative time.
    /// The sync service also refuses times too far in the future, which needs its clock.
    public func validate() throws {
        if let user = self.user {
            try CutoffUserID.validate(user)
        }
        if self.at < 0 {
            throw CutoffStoreError(code: .invalidTime, message: "a cutoff time must not be before 1970")
        }
    }
}

/// What a store reports after a successful write.
public struct CutoffWriteResult: Sendable, Hashable {
    /// The cutoff now stored for the field the write was about.
    public var cutoff: Int64
    /// Whether the stored value changed (`false` when the same time was already stored).
    public var changed: Bool
    /// Whether the write was forced; the sync service then reloads the whole store, because the force epoch
    /// changed and the forward-only merge must not hide the earlier value.
    public var forced: Bool

    public init(cutoff: Int64, changed: Bool, forced: Bool) {
        self.cutoff = cutoff
        self.changed = changed
        self.forced = forced
    }
}

extension CutoffWriteResult {
    /// The result of a non-forced write whose guarded statement changed nothing, shared by the stores that
    /// decide forward-only inside one SQL statement and then read the kept value: the same time was already
    /// stored (success, unchanged), or a later one (refused with ``CutoffStoreError/Code/cutoffWouldMoveBackward``).
    ///
    /// - Parameters:
    ///   - kept: The value stored after the guarded statement; `nil` when there is none.
    ///   - requested: The time the write asked for.
    ///   - what: Names the cutoff in messages ("the global cutoff").
    static func unchanged(kept: Int64?, requested: Int64, what: String) throws -> CutoffWriteResult {
        guard let kept, kept >= requested else {
            // The guarded statement changed nothing yet the stored value is earlier: a concurrent forced write
            // moved it back between our two statements. Report it as unavailable so the caller retries.
            throw CutoffStoreError(code: .storeUnavailable, message: "\(what) changed concurrently; retry")
        }
        if kept == requested {
            return CutoffWriteResult(cutoff: kept, changed: false, forced: false)
        }
        throw CutoffStoreError(
            code: .cutoffWouldMoveBackward,
            message: "\(what) is already \(kept), later than the requested \(requested); "
                + "cutoffs only move forward unless forced",
            keptCutoff: kept
        )
    }
}
