//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

/// Measures the in-memory snapshot for many users: resident bytes per user, lookup time, and what one user's change
/// costs once a snapshot shares the table (a copy of the old `[CutoffUserKey: UserCutoffs]` next to it, for the
/// comparison).
///
/// Not a CI test: it needs several GiB and a minute. Run it with
/// `TOKENGATE_SCALE_USERS=10000000 swift test -c release --filter SnapshotScaleMeasurement`; it prints the figures
/// and checks only that every inserted user is found and that a change leaves the older version as it was.
@Suite("Snapshot scale measurement", .serialized)
struct SnapshotScaleMeasurement {
    static let users = ProcessInfo.processInfo.environment["TOKENGATE_SCALE_USERS"].flatMap { Int($0) }

    static func id(_ index: Int, kind: String) -> String {
        switch kind {
        case "short": return "u\(index)"  // up to 15 bytes: a small string, stored inline
        default: return "00000000-0000-0000-0000-" + String(index, radix: 16).leftPadded(to: 12)  // a UUID's 36
        }
    }

    @Test(
        "bytes per user, lookup and one change of the persistent map (CutoffUserMap)",
        .enabled(if: Self.users != nil),
        arguments: ["short", "uuid"]
    )
    func measureMap(idKind: String) throws {
        let count = try #require(Self.users)
        let before = Self.residentBytes()
        var users = CutoffUserMap()
        for index in 0..<count {
            users[CutoffUserKey(Self.id(index, kind: idKind))] = UserCutoffs(revokedBefore: Int64(index))
        }
        let snapshot = CutoffSnapshot(users: users, generation: 1)
        let after = Self.residentBytes()

        let lookup = Self.lookups(count: count, idKind: idKind) { snapshot.users[$0] != nil }
        // One user's change while the snapshot holds the table: the path to the user is copied, the rest shared.
        let changes = 1_000
        let beforeChanges = Self.residentBytes()
        let start = ContinuousClock.now
        for index in 0..<changes {
            users[CutoffUserKey(Self.id((index &* 7_919) % count, kind: idKind))] = UserCutoffs(revokedBefore: -1)
        }
        let change = (ContinuousClock.now - start) / changes
        let grown = Self.residentBytes()
        print("SCALE map ids=\(idKind) users=\(count) resident=\((after - before) >> 20) MiB "
            + "bytes/user=\(Int(Double(after - before) / Double(count))) lookup=\(lookup) change=\(change) "
            + "resident after \(changes) changes +\((grown - beforeChanges) >> 10) KiB")
        #expect(snapshot.users[CutoffUserKey(Self.id(0, kind: idKind))] == UserCutoffs(revokedBefore: 0))
    }

    @Test(
        "the same with [CutoffUserKey: UserCutoffs] and two Int64?, as before",
        .enabled(if: Self.users != nil),
        arguments: ["short", "uuid"]
    )
    func measureDictionary(idKind: String) throws {
        let count = try #require(Self.users)
        struct OldCutoffs: Hashable {
            var revokedBefore: Int64?
            var apiRevokedBefore: Int64?
        }
        let before = Self.residentBytes()
        var users: [CutoffUserKey: OldCutoffs] = [:]
        for index in 0..<count {
            users[CutoffUserKey(Self.id(index, kind: idKind))] = OldCutoffs(revokedBefore: Int64(index))
        }
        let after = Self.residentBytes()
        let lookup = Self.lookups(count: count, idKind: idKind) { users[$0] != nil }
        let shared = users
        let start = ContinuousClock.now
        users[CutoffUserKey(Self.id(1, kind: idKind))] = OldCutoffs(revokedBefore: -1)
        let change = ContinuousClock.now - start
        print("SCALE dictionary ids=\(idKind) users=\(count) resident=\((after - before) >> 20) MiB "
            + "bytes/user=\(Int(Double(after - before) / Double(count))) lookup=\(lookup) "
            + "first change while shared=\(change)")
        #expect(shared[CutoffUserKey(Self.id(1, kind: idKind))] == OldCutoffs(revokedBefore: 1))
    }

    /// The time per lookup of a million users spread over the table, their keys made beforehand.
    static func lookups(count: Int, idKind: String, _ lookup: (CutoffUserKey) -> Bool) -> Duration {
        let probes = (0..<1_000_000).map { CutoffUserKey(Self.id(($0 &* 7_919) % count, kind: idKind)) }
        var found = 0
        let start = ContinuousClock.now
        for key in probes where lookup(key) {
            found += 1
        }
        let elapsed = ContinuousClock.now - start
        #expect(found == probes.count)
        return elapsed / probes.count
    }

    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else {
            return 0
        }
        let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: Swift.max(0, length - self.count)) + self
    }
}
