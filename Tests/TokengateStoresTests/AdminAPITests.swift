//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateAdmin
import TokengateTestSupport
import TokengateTokens

@testable import TokengateStores

@Suite("Admin API")
struct AdminAPITests {
    static let now: Int64 = 1_714_564_800

    /// A running service over a fresh SQLite file, and what it published.
    final class Fixture: Sendable {
        let directory: String
        let path: String
        let store: SQLiteCutoffStore
        let published = PublishedSnapshots()
        let service: CutoffSyncService
        let api: AdminAPI

        init() async throws {
            self.directory = NSTemporaryDirectory() + "tokengate-admin-" + UUID().uuidString
            try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: false)
            self.path = self.directory + "/cutoffs.db"
            self.store = try await SQLiteCutoffStore.open(path: self.path)
            self.service = CutoffSyncService(store: self.store, now: { AdminAPITests.now }, publish: self.published.publish)
            try await self.service.start()
            self.api = AdminAPI(service: self.service)
        }

        func call(_ method: String, _ path: String, _ body: String = "") async -> AdminResponse {
            await self.api.handle(method: method, path: path, body: Array(body.utf8))
        }

        func finish() async throws {
            try await self.store.close()
            try FileManager.default.removeItem(atPath: self.directory)
        }
    }

    static func object(_ response: AdminResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.json.utf8)) as? [String: Any])
    }

    @Test("password-changed defaults to now, is published before the 200, and GET reads it back")
    func passwordChanged() async throws {
        let fixture = try await Fixture()
        let response = await fixture.call("POST", "/admin/users/alice/password-changed")
        #expect(response.status == 200)
        #expect(fixture.published.latest?.users["alice"]?.revokedBefore == Self.now)
        let body = try Self.object(response)
        #expect(body["user"] as? String == "alice")
        #expect((body["revoked_before"] as? NSNumber)?.int64Value == Self.now)
        #expect(body["api_revoked_before"] is NSNull)
        #expect(body["changed"] as? Bool == true)
        #expect((body["generation"] as? NSNumber)?.uint64Value == fixture.published.latest?.generation)

        let read = await fixture.call("GET", "/admin/users/alice")
        #expect(read.status == 200)
        #expect(read.json == #"{"user":"alice","revoked_before":1714564800,"api_revoked_before":null,"global_revoked_before":null}"#)
        try await fixture.finish()
    }

    @Test("disable-mobile-apps and revoke-all take at as UNIX seconds or RFC 3339")
    func otherWrites() async throws {
        let fixture = try await Fixture()
        let mobile = await fixture.call("POST", "/admin/users/bob/disable-mobile-apps", #"{"at": "2024-05-01T11:00:00Z"}"#)
        #expect(mobile.status == 200)
        #expect(fixture.published.latest?.users["bob"] == UserCutoffs(apiRevokedBefore: Self.now - 3600))
        let all = await fixture.call("POST", "/admin/revoke-all", #"{"at": 1714560000}"#)
        #expect(all.status == 200)
        #expect(all.json == #"{"global_revoked_before":1714560000,"changed":true,"generation":3}"#)
        #expect(fixture.published.latest?.globalRevokedBefore == 1_714_560_000)
        try await fixture.finish()
    }

    @Test("ids are percent-decoded and validated")
    func percentDecodedIDs() async throws {
        let fixture = try await Fixture()
        let response = await fixture.call("POST", "/admin/users/team%2Falice%40example.com%20x/password-changed")
        #expect(response.status == 200)
        #expect(fixture.published.latest?.users["team/alice@example.com x"]?.revokedBefore == Self.now)
        #expect(try Self.object(response)["user"] as? String == "team/alice@example.com x")
        let unicode = await fixture.call("GET", "/admin/users/%E3%83%A6%E3%83%BC%E3%82%B6%E3%83%BC")
        #expect(unicode.status == 200)
        #expect(try Self.object(unicode)["user"] as? String == "ユーザー")

        for bad in ["%0A", "a%00b", "%7F", "%zz", "%4", "%C3%28", String(repeating: "a", count: 257),
            String(repeating: "%41", count: 257)]
        {
            let answer = await fixture.call("POST", "/admin/users/\(bad)/password-changed")
            #expect(answer.status == 400, "\(bad)")
            #expect(try Self.object(answer)["error"] as? String == "invalid_user_id", "\(bad)")
            #expect(answer.json.contains("error_description"))
        }
        try await fixture.finish()
    }

    @Test("bad times and bad bodies are 400", arguments: [
        (#"{"at": "yesterday"}"#, "invalid_time"),
        (#"{"at": -5}"#, "invalid_time"),
        (#"{"at": 1.5}"#, "invalid_time"),
        (#"{"at": true}"#, "invalid_time"),
        (#"{"at": 1914564800}"#, "invalid_time"),
        (#"{"force": 1}"#, "invalid_request"),
        (#"{"forse": true}"#, "invalid_request"),
        (#"[1]"#, "invalid_request"),
        ("not json", "invalid_request"),
    ])
    func badBodies(body: String, error: String) async throws {
        let fixture = try await Fixture()
        let answer = await fixture.call("POST", "/admin/users/alice/password-changed", body)
        #expect(answer.status == 400)
        #expect(try Self.object(answer)["error"] as? String == error)
        #expect(fixture.published.all.count == 1, "nothing may be published for a refused request")
        try await fixture.finish()
    }

    /// `JSONSerialization` keeps the last of repeated names: `"force":false,"force":true` forced a cutoff
    /// backward although the body reads as not forced. Every repetition is refused and named, escaped
    /// spellings included; one in a nested value is not a top-level repetition.
    @Test("a repeated member is 400 naming it, and nothing is written", arguments: [
        (#"{"at":1000,"force":false,"force":true}"#, "force"),
        (#"{"at":1714563000,"at":1000}"#, "at"),
        (#"{"force":false,"forc\u0065":true,"at":1000}"#, "force"),
        (#"{"at":1000,"x":{"y":1},"at":1}"#, "at"),
    ])
    func repeatedMembers(body: String, name: String) async throws {
        let fixture = try await Fixture()
        #expect(await fixture.call("POST", "/admin/users/alice/password-changed", #"{"at": 1714564000}"#).status == 200)
        let published = fixture.published.all.count
        let answer = await fixture.call("POST", "/admin/users/alice/password-changed", body)
        #expect(answer.status == 400, "\(answer.json)")
        let object = try Self.object(answer)
        #expect(object["error"] as? String == "invalid_request")
        #expect((object["error_description"] as? String)?.contains("\"\(name)\" more than once") == true, "\(answer.json)")
        #expect(fixture.published.all.count == published, "nothing may be published for a refused request")
        #expect(fixture.published.latest?.users["alice"]?.revokedBefore == 1_714_564_000)
        try await fixture.finish()
    }

    @Test("an unknown member is named in the refusal when it is short printable ASCII, and nothing is published", arguments: [
        (#"{"bogus":1}"#, "unknown field \"bogus\""),
        (#"{"at":1000,"Force":true}"#, "unknown field \"Force\""),
        ("{\"" + String(repeating: "x", count: 65) + "\":1}", "an unknown field"),
        (#"{"a\nb":1}"#, "an unknown field"),
    ])
    func unknownMembers(body: String, named: String) async throws {
        let fixture = try await Fixture()
        let published = fixture.published.all.count
        let answer = await fixture.call("POST", "/admin/users/alice/password-changed", body)
        #expect(answer.status == 400, "\(answer.json)")
        let object = try Self.object(answer)
        #expect(object["error"] as? String == "invalid_request")
        #expect((object["error_description"] as? String)?.hasPrefix(named + " in the body") == true, "\(answer.json)")
        #expect(fixture.published.all.count == published)
        try await fixture.finish()
    }

    @Test("names repeated only inside nested values are not repeated members")
    func nestedNamesAreNotRepeats() {
        #expect(AdminAPI.repeatedMember(Array(#"{"at":{"a":1,"a":2},"force":"force"}"#.utf8)) == nil)
        #expect(AdminAPI.repeatedMember(Array(#"{"a\"b":1,"a\"b":2}"#.utf8)) == "a\"b")
        #expect(AdminAPI.repeatedMember(Array(#"{"at":1,"force":true}"#.utf8)) == nil)
    }

    @Test("moving a cutoff back needs force; without it the answer is 409 with the kept value")
    func forwardOnly() async throws {
        let fixture = try await Fixture()
        #expect(await fixture.call("POST", "/admin/users/alice/password-changed", #"{"at": 1714564000}"#).status == 200)
        let refused = await fixture.call("POST", "/admin/users/alice/password-changed", #"{"at": 1714563000}"#)
        #expect(refused.status == 409)
        let body = try Self.object(refused)
        #expect(body["error"] as? String == "cutoff_would_move_backward")
        #expect((body["current"] as? NSNumber)?.int64Value == 1_714_564_000)
        let forced = await fixture.call("POST", "/admin/users/alice/password-changed", #"{"at": 1714563000, "force": true}"#)
        #expect(forced.status == 200)
        #expect(fixture.published.latest?.users["alice"]?.revokedBefore == 1_714_563_000)
        let same = await fixture.call("POST", "/admin/users/alice/password-changed", #"{"at": 1714563000}"#)
        #expect(try Self.object(same)["changed"] as? Bool == false)
        try await fixture.finish()
    }

    @Test("unknown routes are 404, wrong methods 405 with Allow, big bodies 413")
    func routing() async throws {
        let fixture = try await Fixture()
        for path in ["/", "/admin", "/admin/", "/admin/users", "/admin/users/", "/admin/users//password-changed",
            "/admin/users/alice/other", "/admin/users/alice/password-changed/x", "/other/revoke-all", "admin/revoke-all"]
        {
            let answer = await fixture.call("POST", path)
            #expect(answer.status == 404, "\(path)")
            #expect(try Self.object(answer)["error"] as? String == "not_found")
        }
        let get = await fixture.call("GET", "/admin/users/alice/password-changed")
        #expect(get.status == 405)
        #expect(get.headers["Allow"] == "POST")
        #expect(try Self.object(get)["error"] as? String == "method_not_allowed")
        let post = await fixture.call("POST", "/admin/users/alice")
        #expect(post.status == 405)
        #expect(post.headers["Allow"] == "GET")
        #expect(await fixture.call("DELETE", "/admin/revoke-all").status == 405)
        let big = await fixture.call("POST", "/admin/revoke-all", "{\"at\": 1" + String(repeating: " ", count: 5000) + "}")
        #expect(big.status == 413)
        // A query string is not part of the route.
        #expect(await fixture.call("GET", "/admin/users/alice?x=1").status == 200)
        try await fixture.finish()
    }

    @Test("a store that is down is 503 without its internals, and a read-only store is 409")
    func storeDown() async throws {
        let fixture = try await Fixture()
        try moveDatabase(from: fixture.path, to: fixture.directory + "/away.db")
        for (method, path) in [("POST", "/admin/users/alice/password-changed"), ("GET", "/admin/users/alice"),
            ("POST", "/admin/revoke-all"), ("POST", "/admin/users/alice/disable-mobile-apps")]
        {
            let answer = await fixture.call(method, path)
            #expect(answer.status == 503, "\(method) \(path)")
            #expect(try Self.object(answer)["error"] as? String == "store_unavailable")
            #expect(!answer.json.contains(fixture.directory), "the answer must not leak the file path")
        }
        try await fixture.finish()

        let directory = try TemporaryDirectory()
        try writeFile(directory.file("c.json"), "{}")
        let service = CutoffSyncService(store: JSONFileCutoffStore(path: directory.file("c.json")), publish: { _ in })
        try await service.start()
        let readOnly = await AdminAPI(service: service).handle(method: "POST", path: "/admin/revoke-all", body: [])
        #expect(readOnly.status == 409)
        #expect(try Self.object(readOnly)["error"] as? String == "read_only_store")
    }
}

/// Every cutoff write leaves a `notice` line: the action, the user, `at`, `force`, the peer, and what came of
/// it. Before, hundreds of writes, forced backward moves (which un-revoke tokens) among them, left no trace.
@Suite struct AdminAPIAuditTests {
    @Test func everyWriteIsLoggedWithItsOutcomeAndPeer() async throws {
        let fixture = try await AdminAPITests.Fixture()
        let lines = RecordedLogLines()
        let api = AdminAPI(service: fixture.service, logger: lines.logger())
        let now = AdminAPITests.now
        _ = await api.handle(method: "POST", path: "/admin/users/alice/password-changed", body: [], client: "192.0.2.7:5151")
        _ = await api.handle(method: "POST", path: "/admin/users/alice/password-changed", body: Array(#"{"at": 1000}"#.utf8))
        _ = await api.handle(
            method: "POST", path: "/admin/users/alice/password-changed", body: Array(#"{"at": 1000, "force": true}"#.utf8), client: "192.0.2.8:1"
        )
        _ = await api.handle(method: "POST", path: "/admin/revoke-all", body: [])
        _ = await api.handle(method: "GET", path: "/admin/users/alice", body: [])
        let written = lines.all
        try #require(written.count == 4, "one line per write, none for the read: \(written)")
        #expect(written.allSatisfy { $0.level == .notice })
        #expect(written[0].message == "cutoff written")
        #expect(written[0].metadata == ["action": "password-changed", "user": "alice", "force": "false", "client": "192.0.2.7:5151",
                                 "cutoff": "\(now)", "changed": "true"])
        #expect(written[1].message == "cutoff write refused")
        #expect(written[1].metadata["error"] == "cutoff_would_move_backward" && written[1].metadata["at"] == "1000", "\(written[1])")
        #expect(written[2].message == "cutoff written")
        #expect(
            written[2].metadata["force"] == "true" && written[2].metadata["cutoff"] == "1000" && written[2].metadata["changed"] == "true",
            "\(written[2])"
        )
        #expect(written[3].metadata["action"] == "revoke-all" && written[3].metadata["user"] == nil, "\(written[3])")
        try await fixture.finish()
    }
}
