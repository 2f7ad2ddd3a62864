//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Benchmark
import JWTKit
import TokengateTokens

/// The hot path of DESIGN §11, per algorithm, four ways on the same token and key:
/// - `<ALG>/tokengate`: TokenVerifier.verify: parse, signature, claims, cutoff lookup in a ~10k-user snapshot;
/// - `<ALG>/jwt-kit`: vapor/jwt-kit 5.8.0 verifying the same token into an equivalent claims struct, plus the same
///   cutoff lookup;
/// - `<ALG>/libcrypto`: the bare libcrypto verification of the same signature over the same signing input with
///   every key object and context prepared in advance: the floor the asymmetric budget is measured against;
/// - `<ALG>/libcrypto-oneshot`: the same with the textbook per-call context setup, to show what preparing saves;
/// - `<ALG>/tokengate-cached` (public-key algorithms): the same token again through an event loop's
///   ``VerifiedTokenCache``, as the gateway verifies a client's token from its second request on: the keyed digest,
///   the lookup and every check after the signature (times, cutoff lookup, kind), 1000 per iteration like HS256.
///
/// HS256 runs 1000 verifications per measured iteration (`scalingFactor: .kilo`, figures are per verification),
/// because one verification is shorter than the clock and malloc-counter overhead of an iteration. The public-key
/// algorithms take tens of microseconds each and run one per iteration. Times are reported in nanoseconds so that the
/// 10 % budget can be read off directly (microseconds round a 17.4 µs verification to 17).
let benchmarks: @Sendable () -> Void = {
    let metrics: [BenchmarkMetric] = [.wallClock, .mallocCountTotal, .instructions, .throughput]
    let algorithms: [TokenAlgorithm] = [.hs256, .edDSA, .es256, .rs256, .ps256]

    for algorithm in algorithms {
        let fixture: BenchFixture
        let floor: LibcryptoFloor
        do {
            fixture = try BenchFixture(algorithm: algorithm)
            floor = try LibcryptoFloor(fixture)
        } catch {
            fatalError("benchmark setup for \(algorithm.rawValue) failed: \(error)")
        }
        let name = algorithm.rawValue
        let configuration: Benchmark.Configuration =
            algorithm == .hs256
            ? .init(
                metrics: metrics,
                timeUnits: .nanoseconds,
                warmupIterations: 10,
                scalingFactor: .kilo,
                maxDuration: .seconds(2),
                maxIterations: 2_000
            )
            : .init(
                metrics: metrics,
                timeUnits: .nanoseconds,
                warmupIterations: 50,
                scalingFactor: .one,
                maxDuration: .seconds(2),
                maxIterations: 20_000
            )

        // tokengate: what the gateway does per request once it has the token bytes.
        let verifier = fixture.verifier
        let token = fixture.token
        let cutoffs = fixture.cutoffs
        let now = fixture.now
        Benchmark("\(name)/tokengate", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(verifier.verify(token, accept: .api, cutoffs: cutoffs, now: now))
            }
        } setup: {
            // Measure the accepting path only: a rejection would skip work and flatter the figures.
            let result = verifier.verify(token, accept: .api, cutoffs: cutoffs, now: now)
            guard case .valid(let verified) = result, verified.subject == BenchFixture.subject,
                verified.issuedAt == fixture.issuedAt, verified.kind == .api
            else { throw BenchSetupError("\(name)/tokengate: the token does not verify: \(result)") }
        }

        // tokengate through a warm cache: the token is verified once in setup, then every iteration is a hit.
        if !algorithm.isHMAC {
            let cacheBox = VerifiedTokenCacheBox()
            let cachedConfiguration = Benchmark.Configuration(
                metrics: metrics,
                timeUnits: .nanoseconds,
                warmupIterations: 10,
                scalingFactor: .kilo,
                maxDuration: .seconds(2),
                maxIterations: 2_000
            )
            Benchmark("\(name)/tokengate-cached", configuration: cachedConfiguration) { benchmark in
                let cache = cacheBox.cache
                for _ in benchmark.scaledIterations {
                    blackHole(verifier.verify(token, accept: .api, cutoffs: cutoffs, now: now, cache: cache))
                }
            } setup: {
                let cache = cacheBox.cache
                let first = verifier.verify(token, accept: .api, cutoffs: cutoffs, now: now, cache: cache)
                let again = verifier.verify(token, accept: .api, cutoffs: cutoffs, now: now, cache: cache)
                guard case .valid(let verified) = again, verified.subject == BenchFixture.subject, first == again,
                    cache.count == 1, cache.hits >= 1
                else { throw BenchSetupError("\(name)/tokengate-cached: the token is not served from the cache") }
            }
        }

        // jwt-kit: its public API, an actor, so each verification is an await.
        let jwtKitKeys = JWTKitKeysBox()
        Benchmark("\(name)/jwt-kit", configuration: configuration) { benchmark in
            let keys = jwtKitKeys.keys!
            for _ in benchmark.scaledIterations {
                let claims = try await keys.verify(token, as: JWTKitClaims.self)
                guard claims.passesCutoffs(cutoffs) else { throw BenchSetupError("\(name)/jwt-kit: revoked") }
                blackHole(claims)
            }
        } setup: {
            let keys = try await fixture.makeJWTKitKeys()
            let claims = try await keys.verify(token, as: JWTKitClaims.self)
            guard claims.sub.value == BenchFixture.subject, claims.apiOnly, claims.passesCutoffs(cutoffs) else {
                throw BenchSetupError("\(name)/jwt-kit: the token does not verify as expected")
            }
            jwtKitKeys.keys = keys
        }

        Benchmark("\(name)/libcrypto", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(floor.verifyPrepared())
            }
        }

        Benchmark("\(name)/libcrypto-oneshot", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(floor.verifyOneShot())
            }
        }
    }
    cutoffBenchmarks()

    // The web frameworks' session cookies, next to HS256 (SessionCookieRows.swift).
    sessionCookieBenchmarks(metrics: metrics)
}

/// The cutoff lookup alone (``CutoffSnapshot/revocation(subject:issuedAt:kind:)``), in snapshots of 5,000 and
/// 10 million users: 1000 lookups of users spread over the table per measured (scaled) iteration, so the figures are
/// per 1000 lookups. `…-N-changed`: the same snapshot after N changes since its table was built (10,000; 2,500 at
/// 5,000 users), which the map's overlay holds. Next to each, `cutoffs/dictionary-…`: the same lookups in the
/// snapshot as it was before the two-level map (a `Dictionary` of two `Int64?`), for the comparison in one run.
/// Registered after the verification rows; building the 10-million tables takes some seconds of setup each.
let cutoffBenchmarks: @Sendable () -> Void = {
    for userCount in [5_000, 10_000_000] {
        let issuedAt: Int64 = 1_700_000_000
        var users = CutoffUserMap()
        for index in 0..<userCount {
            users[CutoffUserKey("user-\(index)")] = UserCutoffs(revokedBefore: issuedAt - 86_400)
        }
        let snapshot = CutoffSnapshot(users: users, generation: 1)
        let subjects = (0..<1000).map { "user-\(($0 &* 7_919) % userCount)" }
        Benchmark(
            "cutoffs/lookup-\(userCount)-users",
            configuration: .init(
                metrics: [.wallClock, .mallocCountTotal, .instructions],
                timeUnits: .nanoseconds,
                warmupIterations: 10,
                scalingFactor: .kilo,
                maxDuration: .seconds(2),
                maxIterations: 2_000
            )
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                for subject in subjects {
                    blackHole(snapshot.revocation(subject: subject, issuedAt: issuedAt, kind: .api))
                }
            }
        }
        // The same table once 10,000 users changed after it was published (a day of revocations at a large
        // site): those changes sit in the map's overlay, which a lookup reads only for a user whose slot is marked
        // as changed (at 10 million users, 1 of the 1000 looked up; at 5,000, half of them changed, and a third of the
        // slots are marked).
        // (Half the users at 5,000, below the count at which the changes are folded into a new table.)
        let changes = min(10_000, userCount / 2)
        var changed = users
        for index in 0..<changes {
            changed[CutoffUserKey("user-\((index &* 104_729) % userCount)")] = UserCutoffs(revokedBefore: issuedAt - 3_600)
        }
        let changedSnapshot = CutoffSnapshot(users: changed, generation: 2)
        precondition(changed.overlayCount > 0 && users.overlayCount == 0, "the changes must sit in the overlay")
        Benchmark(
            "cutoffs/lookup-\(userCount)-users-\(changes)-changed",
            configuration: .init(
                metrics: [.wallClock, .mallocCountTotal, .instructions],
                timeUnits: .nanoseconds,
                warmupIterations: 10,
                scalingFactor: .kilo,
                maxDuration: .seconds(2),
                maxIterations: 2_000
            )
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                for subject in subjects {
                    blackHole(changedSnapshot.revocation(subject: subject, issuedAt: issuedAt, kind: .api))
                }
            }
        }
        let dictionary = DictionarySnapshot(userCount: userCount, revokedBefore: issuedAt - 86_400)
        Benchmark(
            "cutoffs/dictionary-lookup-\(userCount)-users",
            configuration: .init(
                metrics: [.wallClock, .mallocCountTotal, .instructions],
                timeUnits: .nanoseconds,
                warmupIterations: 10,
                scalingFactor: .kilo,
                maxDuration: .seconds(2),
                maxIterations: 2_000
            )
        ) { benchmark in
            for _ in benchmark.scaledIterations {
                for subject in subjects {
                    blackHole(dictionary.revocation(subject: subject, issuedAt: issuedAt, kind: .api))
                }
            }
        }
    }
}

/// The snapshot's table and lookup as they were before the persistent map: a `Dictionary` keyed by user, each
/// entry two optional times (32 bytes), the lookup of ``CutoffSnapshot/revocation(subject:issuedAt:kind:)`` then.
final class DictionarySnapshot: Sendable {
    struct Cutoffs: Hashable {
        var revokedBefore: Int64?
        var apiRevokedBefore: Int64?
    }

    let globalRevokedBefore: Int64? = nil
    let users: [CutoffUserKey: Cutoffs]

    init(userCount: Int, revokedBefore: Int64) {
        var users: [CutoffUserKey: Cutoffs] = [:]
        users.reserveCapacity(userCount)
        for index in 0..<userCount {
            users[CutoffUserKey("user-\(index)")] = Cutoffs(revokedBefore: revokedBefore)
        }
        self.users = users
    }

    @inline(never)
    func revocation(subject: String, issuedAt: Int64, kind: TokenKind) -> RejectionReason? {
        if let global = self.globalRevokedBefore, issuedAt < global { return .revoked }
        guard !self.users.isEmpty, let user = self.users[CutoffUserKey(subject)] else { return nil }
        if let revokedBefore = user.revokedBefore, issuedAt < revokedBefore { return .revoked }
        if kind == .api, let apiRevokedBefore = user.apiRevokedBefore, issuedAt < apiRevokedBefore {
            return .apiRevoked
        }
        return nil
    }
}

/// Carries the jwt-kit key collection from a benchmark's async setup to its iterations.
///
/// `@unchecked Sendable`: written once in the setup hook, which package-benchmark awaits before the first
/// iteration, and only read afterwards.
/// One event loop's cache for the `-cached` rows. `@unchecked Sendable`: the benchmark runs its closures one at a
/// time on one thread, as a gateway's loop uses its own cache.
final class VerifiedTokenCacheBox: @unchecked Sendable {
    let cache = VerifiedTokenCache(entries: TokenSettingsDefaults.entries)
}

/// The gateway's default size (`tokens.verified_cache.entries`).
enum TokenSettingsDefaults {
    static let entries = 4096
}

final class JWTKitKeysBox: @unchecked Sendable {
    var keys: JWTKeyCollection?
}
