//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

/// Measures the in-memory snapshot for many users: bytes per entry and lookup time.
///
/// Not a CI test: it needs several GiB and a minute. Run it with
/// `TOKENGATE_SCALE_USERS=10000000 swift test --filter SnapshotScaleMeasurement`; it prints the figures and
/// checks only that every inserted user is found.
@Suite("Snapshot scale measurement", .serialized)
struct SnapshotScaleMeasurement {
    static let users = ProcessInfo.processInfo.environment["TOKENGATE_SCALE_USERS"].flatMap { Int($0) }

    @Test(
        "bytes per entry and lookup cost of [String: UserCutoffs]",
        .enabled(if: Self.users != nil),
        arguments: ["short", "uuid"]
    )
    func measure(idKind: String) throws {
        let count = try #require(Self.users)
        func id(_ index: Int) -> String {
            switch idKind {
            case "short": return "u\(index)"  // up to 15 bytes: a small string, stored inline
            default: return "\(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)).uuidString.prefix(24))\(String(index, radix: 16).leftPadded(to: 12))"
            }
        }
        let before = Self.residentBytes()
        var users: [CutoffUserKey: UserCutoffs] = [:]
        users.reserveCapacity(count)
        for index in 0..<count {
            users[CutoffUserKey(id(index))] = UserCutoffs(revokedBefore: Int64(index), apiRevokedBefore: nil)
        }
        let snapshot = CutoffSnapshot(users: users, generation: 1)
        users = [:]
        let after = Self.residentBytes()

        var found = 0
        let probes = 1_000_000
        let start = ContinuousClock.now
        for index in 0..<probes {
            if snapshot.users[CutoffUserKey(id((index &* 7_919) % count))] != nil {
                found += 1
            }
        }
        let elapsed = ContinuousClock.now - start
        let perEntry = Double(after - before) / Double(count)
        print("SCALE ids=\(idKind) users=\(count) resident=\((after - before) >> 20) MiB bytes/entry=\(Int(perEntry)) "
            + "capacity=\(snapshot.users.capacity) lookup(incl. id build)=\(elapsed / probes)")
        #expect(found == probes)
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
