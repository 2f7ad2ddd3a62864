//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// The cutoffs of an enforced table that lie further ahead than a write may set one
/// (``CutoffSyncService/Configuration/maxFutureSkew``, 300 s).
///
/// Writes refuse such a time, but a store can hold one anyway: the RP's own table filled by a database whose
/// clock is ahead, a JSON file written in milliseconds (`1714564800000`), an operator's own SQL. The sync service
/// enforces it as it is (failing closed: a cutoff the store holds is never lowered), so it rejects every token of
/// the user until then, the ones issued after the password change included, and a reload does not lower it when
/// the source is fixed (that takes a restart, or a forced write). It is logged and counted so an operator sees
/// it and fixes it at its source.
struct FutureCutoffs: Equatable, Sendable {
    /// The global cutoff, when it is one of them.
    var global: Int64?
    /// Per user, the later of the user's two cutoffs, for the users with one of them.
    var users: [CutoffUserKey: Int64]

    static let none = FutureCutoffs(global: nil, users: [:])

    private init(global: Int64?, users: [CutoffUserKey: Int64]) {
        self.global = global
        self.users = users
    }

    /// The cutoffs of `table` later than `limit` (UNIX seconds). One pass over the table: the reload that
    /// produced it made one too.
    init(in table: CutoffTable, after limit: Int64) {
        self.global = table.globalRevokedBefore.flatMap { $0 > limit ? $0 : nil }
        var users: [CutoffUserKey: Int64] = [:]
        for (user, cutoffs) in table.users {
            if let latest = CutoffTable.later(cutoffs.revokedBefore, cutoffs.apiRevokedBefore), latest > limit {
                users[user] = latest
            }
        }
        self.users = users
    }

    /// Takes a change the feed brought (``CutoffSyncService`` reads changed rows, not the whole table): the user's
    /// merged cutoffs now, which may have become one of them.
    mutating func note(_ user: CutoffUserKey, _ cutoffs: UserCutoffs, after limit: Int64) {
        if let latest = CutoffTable.later(cutoffs.revokedBefore, cutoffs.apiRevokedBefore), latest > limit {
            self.users[user] = latest
        } else {
            self.users[user] = nil
        }
    }

    /// Takes the global cutoff as the feed read it.
    mutating func note(global: Int64?, after limit: Int64) {
        self.global = global.flatMap { $0 > limit ? $0 : nil }
    }

    var isEmpty: Bool {
        self.global == nil && self.users.isEmpty
    }

    /// How many of them are still later than `limit`: time catches up with a cutoff a little ahead.
    func count(after limit: Int64) -> Int {
        (self.global.map { $0 > limit ? 1 : 0 } ?? 0) + self.users.values.count(where: { $0 > limit })
    }

    /// The latest of them.
    var furthest: Int64? {
        CutoffTable.later(self.global, self.users.values.max())
    }

    /// Whether every one of them is in `other` with the same time: nothing new to tell.
    func isContained(in other: FutureCutoffs) -> Bool {
        (self.global == nil || self.global == other.global)
            && self.users.allSatisfy { other.users[$0.key] == $0.value }
    }

    /// Up to `limit` user ids, sorted, for a log line.
    func someUsers(_ limit: Int) -> [String] {
        Array(self.users.keys.map(\.id).sorted().prefix(limit))
    }
}
