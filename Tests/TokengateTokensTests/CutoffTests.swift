//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import Testing

@testable import TokengateTokens

@Suite struct CutoffTests {
    func parse(_ json: String) throws -> CutoffSnapshot { try CutoffSnapshot(json: Array(json.utf8)) }

    func error(_ json: String) -> CutoffFileError? {
        do {
            _ = try self.parse(json)
            return nil
        } catch {
            return error as? CutoffFileError
        }
    }

    @Test func goodFiles() throws {
        let full = try self.parse(
            #"""
            {"global_revoked_before": 1700000000,
             "users": {"alice": {"revoked_before": 1750000000, "api_revoked_before": 1760000000},
                       "bob": {"api_revoked_before": 1760000000},
                       "carol": {"revoked_before": null},
                       "jürgen": {}}}
            """#
        )
        #expect(full.globalRevokedBefore == 1_700_000_000)
        #expect(full.users["alice"] == UserCutoffs(revokedBefore: 1_750_000_000, apiRevokedBefore: 1_760_000_000))
        #expect(full.users["bob"] == UserCutoffs(apiRevokedBefore: 1_760_000_000))
        #expect(full.users["carol"] == UserCutoffs())
        #expect(full.users["jürgen"] == UserCutoffs())
        let empty = try self.parse("{}")
        #expect(empty.globalRevokedBefore == nil && empty.users.isEmpty)
        #expect(try self.parse(#"{"global_revoked_before":null,"users":null}"#).users.isEmpty)
        #expect(try self.parse(#"{"global_revoked_before":0}"#).globalRevokedBefore == 0)
        // Whole numbers written another way (Python's json writes floats as `1700000000.0`), and a BOM.
        for spelling in ["1.7e9", "1700000000.0", "17E8", "1700000000e0"] {
            #expect(try self.parse(#"{"global_revoked_before":\#(spelling)}"#).globalRevokedBefore == 1_700_000_000, "\(spelling)")
        }
        #expect(try self.parse(#"{"global_revoked_before":-0}"#).globalRevokedBefore == 0)
        #expect(try CutoffSnapshot(json: [0xEF, 0xBB, 0xBF] + Array(#"{"users":{"a":{}}}"#.utf8)).users.count == 1)
    }

    @Test func badShapes() {
        let cases: [(String, String)] = [
            ("", "invalid_json"),
            ("{", "invalid_json"),
            ("[]", "invalid_json"),
            ("42", "invalid_json"),
            (#"{"global_revoked_before":"1700000000"}"#, "invalid_value"),
            (#"{"global_revoked_before":1700000000.5}"#, "invalid_value"),
            (#"{"global_revoked_before":-5}"#, "invalid_value"),
            (#"{"global_revoked_before":1e20}"#, "invalid_value"),
            (#"{"global_revoked_before":99999999999999999999}"#, "invalid_value"),
            (#"{"global_revoked_before":1,"global_revoked_before":2}"#, "invalid_value"),
            (#"{"users":{"alice":{},"alice":{}}}"#, "invalid_value"),
            (#"{"users":{"alice":{"revoked_before":1,"revoked_before":2}}}"#, "invalid_value"),
            (#"{"users":{"alice":{}},}"#, "invalid_json"),
            (#"{"global_revoked_before":true}"#, "invalid_value"),
            (#"{"global_revoked_before":[1]}"#, "invalid_value"),
            (#"{"global_revoke_before":1}"#, "invalid_value"),
            (#"{"users":[]}"#, "invalid_value"),
            (#"{"users":{"alice":1}}"#, "invalid_value"),
            (#"{"users":{"alice":{"revoke_before":1}}}"#, "invalid_value"),
            (#"{"users":{"alice":{"revoked_before":"yesterday"}}}"#, "invalid_value"),
            (#"{"users":{"alice":{"api_revoked_before":false}}}"#, "invalid_value"),
        ]
        for (json, code) in cases {
            let error = self.error(json)
            #expect(error?.code == code, "\(json): \(String(describing: error))")
        }
        #expect(
            self.error(#"{"users":{"alice":{"revoked_before":"x"}}}"#)?.description.contains(
                #"users["alice"].revoked_before"#
            ) == true
        )
    }

    /// `"jos\u00e9"` and `"jose\u0301"` are two users (ids are opaque). Read through Foundation they were one key,
    /// spelt the first way with the second one's cutoffs: the second user had no cutoff at all.
    @Test func idsThatDifferOnlyInUnicodeFormStayTwoUsers() throws {
        let composed = "jos\u{e9}"
        let decomposed = "jose\u{301}"
        let json = #"{"users":{"jos\u00e9":{"revoked_before":200},"jose\u0301":{"revoked_before":100},"#
            + #""\#(composed)x":{"api_revoked_before":7}}}"#
        let snapshot = try self.parse(json)
        #expect(snapshot.users.count == 3)
        #expect(snapshot.users[CutoffUserKey(composed)] == UserCutoffs(revokedBefore: 200))
        #expect(snapshot.users[CutoffUserKey(decomposed)] == UserCutoffs(revokedBefore: 100))
        // Written (the snapshot cache) and read again, byte for byte.
        let again = try CutoffSnapshot(json: [UInt8](snapshot.jsonData()))
        #expect(again.users == snapshot.users)
        // Sorted by bytes: `e` (0x65) before `é` (0xC3 0xA9).
        let expected = #"{"users":{"jose\#u{301}":{"revoked_before":100},"jos\#u{e9}":{"revoked_before":200},"#
            + #""jos\#u{e9}x":{"api_revoked_before":7}}}"#
        let written = try snapshot.jsonData()
        #expect(Array(written) == Array(expected.utf8), "\(String(decoding: written, as: UTF8.self))")
    }

    /// A snapshot cache must read back whatever a store handed over: ids the rules refuse (an `rp_table` may hold
    /// `"bob "` or a tab) are left out, times before 1970 become 0, `Int64.max` (an infinite timestamp) stays.
    @Test func whatIsWrittenIsAlwaysReadBack() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab é\u{301}\t\u{202e}\"\\x")
        for _ in 0..<200 {
            var users: [CutoffUserKey: UserCutoffs] = [:]
            for _ in 0..<Int.random(in: 0...6, using: &generator) {
                let id = String((0..<Int.random(in: 0...4, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! })
                let times: [Int64?] = [nil, 0, -5, 1_700_000_000, .max]
                users[CutoffUserKey(id)] = UserCutoffs(
                    revokedBefore: times.randomElement(using: &generator)!,
                    apiRevokedBefore: times.randomElement(using: &generator)!
                )
            }
            let global: Int64? = [nil, -1, 42, .max].randomElement(using: &generator)!
            let contents = CutoffsJSON.Contents(globalRevokedBefore: global, users: CutoffUserMap(users))
            let written = CutoffsJSON.write(contents)
            let read = try CutoffsJSON.parse(written)
            #expect(read.globalRevokedBefore == global.map { max($0, 0) })
            let kept = users.filter { UserIDRules.problem($0.key.id) == nil }
            #expect(read.users.count == kept.count, "\(String(decoding: written, as: UTF8.self))")
            for (user, cutoffs) in kept {
                #expect(read.users[user]?.revokedBefore == cutoffs.revokedBefore.map { max($0, 0) })
                #expect(read.users[user]?.apiRevokedBefore == cutoffs.apiRevokedBefore.map { max($0, 0) })
            }
        }
    }

    @Test func messagesQuoteNamesShortAndVisible() {
        let long = "a" + String(repeating: "\u{301}", count: 100_000)
        #expect(CutoffsJSON.quoted(long).unicodeScalars.count < 90, "cut by scalars, not by Characters")
        #expect(CutoffsJSON.quoted("ab\u{202e}c\u{2066}\n\u{85}") == #""ab\u202ec\u2066\u000a\u0085""#)
    }

    @Test func jsonDataRoundTrips() throws {
        let snapshot = CutoffSnapshot(
            globalRevokedBefore: 5,
            users: [
                "alice": UserCutoffs(revokedBefore: 10),
                "bob \"quoted\" ü": UserCutoffs(apiRevokedBefore: 20),
                "carol": UserCutoffs(revokedBefore: 30, apiRevokedBefore: 40),
            ]
        )
        let again = try CutoffSnapshot(json: [UInt8](snapshot.jsonData()))
        #expect(again.globalRevokedBefore == 5)
        #expect(again.users == snapshot.users)
        #expect(try CutoffSnapshot(json: [UInt8](CutoffSnapshot.empty.jsonData())).users.isEmpty)
    }

    @Test func loadFromFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tg-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let good = directory.appendingPathComponent("cutoffs.json").path
        try #"{"users":{"alice":{"revoked_before":5}}}"#.write(toFile: good, atomically: true, encoding: .utf8)
        #expect(try CutoffSnapshot.load(jsonFile: good).users["alice"]?.revokedBefore == 5)
        let bad = directory.appendingPathComponent("bad.json").path
        try #"{"users":{"alice":{"revoked_before":true}}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        do {
            _ = try CutoffSnapshot.load(jsonFile: bad)
            Issue.record("must not load")
        } catch let error as CutoffFileError {
            #expect(error.description.contains(bad))
        }
        #expect(throws: CutoffFileError.self) {
            try CutoffSnapshot.load(jsonFile: directory.appendingPathComponent("none").path)
        }
    }

    @Test func holderSwapsAtomically() async throws {
        let first = CutoffSnapshot(globalRevokedBefore: 1, generation: 1)
        let holder = CutoffSnapshotHolder(first)
        #expect(holder.load() === first)
        let second = CutoffSnapshot(users: ["alice": UserCutoffs(revokedBefore: 10)], generation: 2)
        holder.store(second)
        #expect(holder.load() === second)

        // Readers on many tasks always see a whole snapshot: generation and contents agree.
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for generation in UInt64(3)...2000 {
                    holder.store(CutoffSnapshot(globalRevokedBefore: Int64(generation), generation: generation))
                }
                return true
            }
            for _ in 0..<4 {
                group.addTask {
                    var consistent = true
                    for _ in 0..<5000 {
                        let snapshot = holder.load()
                        if snapshot.generation >= 3 && snapshot.globalRevokedBefore != Int64(snapshot.generation) {
                            consistent = false
                        }
                    }
                    return consistent
                }
            }
            for await consistent in group {
                #expect(consistent)
            }
        }
        #expect(holder.load().generation == 2000)
    }

    @Test func verifierUsesTheSnapshotItIsGiven() throws {
        let verifier = TokenVerifier(keys: try TestSupport.hmacKeys())
        let token = TestSupport.hs256(
            header: TestSupport.header,
            payload: TestSupport.claims(iat: TestSupport.now - 10)
        )
        let holder = CutoffSnapshotHolder(.empty)
        #expect(verifier.verify(token, accept: .any, cutoffs: holder.load(), now: TestSupport.now).token != nil)
        holder.store(try self.parse(#"{"users":{"alice":{"revoked_before":\#(TestSupport.now)}}}"#))
        #expect(verifier.verify(token, accept: .any, cutoffs: holder.load(), now: TestSupport.now).reason == "revoked")
    }
}
