//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Testing

@testable import TokengateTokens

/// The two-level map (flat base, persistent overlay) against a `Dictionary` doing the same operations: every version
/// a snapshot published must stay as it was while later versions change, through overlay writes, removals and the
/// rebuild of the base.
@Suite struct CutoffUserMapTests {
    /// SplitMix64: the same sequence on every run, so a failure reproduces.
    struct Numbers {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            self.state &+= 0x9E37_79B9_7F4A_7C15
            var z = self.state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }

    /// Short ids (inline strings), long ones (a heap buffer each), and two spellings of one name that only
    /// Unicode normalization would merge.
    static func user(_ index: Int) -> CutoffUserKey {
        switch index % 4 {
        case 0: return CutoffUserKey("u\(index)")
        case 1: return CutoffUserKey("00000000-0000-4000-8000-\(index)-long-enough-for-the-heap")
        case 2: return CutoffUserKey("jos\u{E9}-\(index)")
        default: return CutoffUserKey("jose\u{301}-\(index - 1)")
        }
    }

    func expectSame(_ map: CutoffUserMap, _ reference: [CutoffUserKey: UserCutoffs], _ note: String) {
        #expect(map.count == reference.count, "\(note): count")
        #expect(map.dictionary == reference, "\(note): entries")
        var visited = 0
        for (key, value) in map {
            visited += 1
            #expect(reference[key] == value, "\(note): \(key)")
        }
        #expect(visited == reference.count, "\(note): iteration")
    }

    @Test func versionsStayAsPublishedThroughChangesAndRebuilds() {
        var numbers = Numbers(state: 42)
        var map = CutoffUserMap()
        var reference: [CutoffUserKey: UserCutoffs] = [:]
        for index in 0..<5_000 {
            let cutoffs = UserCutoffs(revokedBefore: Int64(index))
            map[Self.user(index)] = cutoffs
            reference[Self.user(index)] = cutoffs
        }
        #expect(map.overlayCount == 0, "an unshared map is written in place")
        self.expectSame(map, reference, "built")

        var published: [(CutoffUserMap, [CutoffUserKey: UserCutoffs])] = [(map, reference)]
        var sawRebuild = false
        for step in 0..<12_000 {
            let user = Self.user(numbers.next(7_000))
            switch numbers.next(10) {
            case 0:
                map[user] = nil
                reference[user] = nil
            case 1:
                // The value the base holds: the overlay must not keep an entry that changes nothing.
                let original = reference[user]
                map[user] = UserCutoffs(revokedBefore: -1)
                map[user] = original
            default:
                let cutoffs = UserCutoffs(revokedBefore: Int64(step), apiRevokedBefore: Int64(numbers.next(100)))
                map[user] = cutoffs
                reference[user] = cutoffs
            }
            #expect(map[user] == reference[user], "step \(step)")
            // As the sync service does each time it publishes: one of the base's tables at a time.
            let before = map.overlayCount
            if map.foldStep() {
                sawRebuild = sawRebuild || map.overlayCount < before
                #expect(map[user] == reference[user], "step \(step), folded")
            }
            if step % 1_000 == 0 {
                published.append((map, reference))
            }
        }
        #expect(sawRebuild, "more changes than the threshold while a version is held are folded into the base")
        self.expectSame(map, reference, "after the changes")
        for (index, (version, contents)) in published.enumerated() {
            self.expectSame(version, contents, "published version \(index)")
        }

        let rebuilt = CutoffUserMap(reference)
        #expect(rebuilt == map && map == rebuilt, "equal across different bases")
        #expect(rebuilt.hashValue == map.hashValue)
        var other = map
        other[Self.user(1)] = UserCutoffs(revokedBefore: 123_456_789)
        #expect(other != map, "one change on a shared base")
        #expect(CutoffUserMap(reference) != published[0].0 || reference == published[0].1)
    }

    /// Past the limit, changes nobody folds (a resync that finds many rows changed) are folded all at once, and a
    /// version published before keeps what it had. Users outside the base read the overlay only through marks.
    @Test func overlayPastTheLimitIsFoldedAtOnce() {
        var map = CutoffUserMap()
        var reference: [CutoffUserKey: UserCutoffs] = [:]
        for index in 0..<2_000 {
            map[Self.user(index)] = UserCutoffs(revokedBefore: Int64(index))
            reference[Self.user(index)] = UserCutoffs(revokedBefore: Int64(index))
        }
        let published = map
        let publishedReference = reference
        var sawFold = false
        for index in 0..<40_000 {
            let user = Self.user(1_000 + index)
            map[user] = UserCutoffs(apiRevokedBefore: Int64(index))
            reference[user] = UserCutoffs(apiRevokedBefore: Int64(index))
            if map.overlayCount == 0 {
                sawFold = true
            }
        }
        #expect(sawFold, "more than eight times the threshold folds every table")
        self.expectSame(map, reference, "after the changes")
        self.expectSame(published, publishedReference, "the version published before")
        #expect(published[Self.user(30_000)] == nil && map[Self.user(30_000)] != nil)
    }

    @Test func absentUsersAndRemovals() {
        var map: CutoffUserMap = ["alice": UserCutoffs(revokedBefore: 1)]
        #expect(map["bob"] == nil && map.count == 1)
        let shared = map
        map["alice"] = nil
        #expect(map["alice"] == nil && map.isEmpty && map.overlayCount == 1)
        #expect(shared["alice"] == UserCutoffs(revokedBefore: 1))
        map["alice"] = UserCutoffs(revokedBefore: 1)
        #expect(map == shared && map.overlayCount == 0, "back to the base's value: no overlay entry")
        let empty = CutoffUserMap()
        #expect(empty["alice"] == nil && empty.isEmpty && Array(empty).isEmpty)
        #expect(CutoffUserKey("jos\u{E9}") != CutoffUserKey("jose\u{301}"))
        var spelled = CutoffUserMap()
        spelled["jos\u{E9}"] = UserCutoffs(revokedBefore: 5)
        #expect(spelled["jose\u{301}"] == nil, "ids are bytes: two spellings are two users")
    }

    /// A store's first load: rows in batches placed by slot, more than one batch, a wrong size hint, and users that
    /// come twice keeping the later of each cutoff.
    @Test(arguments: [0, 1_000, 200_000])
    func builderKeepsTheLaterOfRepeatedRows(expectedCount: Int) {
        var builder = CutoffUserMapBuilder(expectedCount: expectedCount)
        var reference: [CutoffUserKey: UserCutoffs] = [:]
        for index in 0..<(CutoffUserMapBuilder.batchRows + 5_000) {
            let user = Self.user(index % 60_000)
            let row = UserCutoffs(
                revokedBefore: index % 3 == 0 ? nil : Int64(index), apiRevokedBefore: Int64(100_000 - index))
            builder.add(user, row)
            let current = reference[user] ?? UserCutoffs()
            reference[user] = UserCutoffs(
                revokedBefore: [current.revokedBefore, row.revokedBefore].compactMap { $0 }.max(),
                apiRevokedBefore: [current.apiRevokedBefore, row.apiRevokedBefore].compactMap { $0 }.max())
        }
        let map = builder.finish()
        #expect(map.overlayCount == 0)
        self.expectSame(map, reference, "built with a hint of \(expectedCount)")
    }
}
