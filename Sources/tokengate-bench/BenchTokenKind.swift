//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The kinds of request the bench sends, each with the status the gateway should answer on an api route.
///
/// Subjects are `bench-<kind>-<n>`, so the cutoffs file (`tokengate-bench cutoffs`) can name the revoked
/// users and give every api user a cutoff older than its tokens: the cutoff lookup then hits a real entry
/// on every request instead of an empty map.
enum BenchTokenKind: String, CaseIterable, Sendable, Codable {
    /// A valid api token (`api_only: true`) in `Authorization: Bearer`.
    case api
    /// A valid session token (`api_only: false`): the wrong kind for an api route.
    case session
    /// An api token issued before its user's `revoked_before`.
    case revoked
    /// An api token whose signature has one character changed.
    case badSignature = "bad_signature"
    /// A valid api token in an `application/x-www-form-urlencoded` POST body (`access_token`).
    case form

    /// Dense index for per-kind arrays (the hot path avoids dictionaries keyed by enums).
    var index: Int {
        switch self {
        case .api: 0
        case .session: 1
        case .revoked: 2
        case .badSignature: 3
        case .form: 4
        }
    }

    /// RFC 6750 answers for an api route: 403 insufficient_scope for the wrong kind, 401 for bad or revoked.
    var defaultExpectedStatus: Int {
        switch self {
        case .api, .form: 200
        case .session: 403
        case .revoked, .badSignature: 401
        }
    }

    func subject(_ number: Int) -> String {
        "bench-\(self.rawValue)-\(number)"
    }
}

/// The fixed timeline shared by `mint`/`run` (which sign tokens) and `cutoffs` (which writes the cutoffs),
/// relative to the moment each runs. Revoked tokens are issued three days ago, their users were cut off one
/// day ago; every other user has a cutoff five days ago, older than all of their tokens. Runs on the same day
/// as the cutoffs file are therefore consistent.
enum BenchTimeline {
    static let day: Int64 = 86_400
    static func revokedIssuedAt(now: Int64) -> Int64 { now - 3 * Self.day }
    static func revokedCutoff(now: Int64) -> Int64 { now - Self.day }
    static func validUserCutoff(now: Int64) -> Int64 { now - 5 * Self.day }
}
