//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTokens

@testable import TokengateStores

@Suite("JSON file cutoff store")
struct JSONFileCutoffStoreTests {
    @Test("a good file loads, including nulls and missing keys")
    func goodFile() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, """
            {"global_revoked_before": 1714564800,
             "users": {"alice": {"revoked_before": 1714564900, "api_revoked_before": 1714565000},
                       "bob": {"api_revoked_before": 5},
                       "carol": {"revoked_before": null},
                       "ユーザー": {"revoked_before": 0}}}
            """)
        let store = JSONFileCutoffStore(path: path)
        let table = try await store.load()
        #expect(table == CutoffTable(
            globalRevokedBefore: 1_714_564_800,
            users: [
                "alice": UserCutoffs(revokedBefore: 1_714_564_900, apiRevokedBefore: 1_714_565_000),
                "bob": UserCutoffs(revokedBefore: nil, apiRevokedBefore: 5),
                "carol": UserCutoffs(),
                "ユーザー": UserCutoffs(revokedBefore: 0),
            ]
        ))
        #expect(try await store.cutoffs(for: "bob") == CutoffLookup(
            user: UserCutoffs(apiRevokedBefore: 5),
            globalRevokedBefore: 1_714_564_800
        ))
        #expect(try JSONFileCutoffStore.parseText("{}") == CutoffTable())
    }

    @Test("ids that differ only in Unicode form are two users, each with its own cutoffs")
    func unicodeFormsAreTwoUsers() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, #"{"users": {"jos\u00e9": {"revoked_before": 200}, "jose\u0301": {"revoked_before": 100}}}"#)
        let store = JSONFileCutoffStore(path: path)
        #expect(try await store.cutoffs(for: "jos\u{e9}").user == UserCutoffs(revokedBefore: 200))
        #expect(try await store.cutoffs(for: "jose\u{301}").user == UserCutoffs(revokedBefore: 100))
    }

    @Test("writes are refused with a clear error")
    func readOnly() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, "{}")
        let store = JSONFileCutoffStore(path: path)
        let error = await expectStoreError(.readOnlyStore) { try await store.passwordChanged(user: "alice", at: 1) }
        #expect(error?.message.contains(path) == true)
        await expectStoreError(.readOnlyStore) { try await store.revokeAll(at: 1) }
        await expectStoreError(.readOnlyStore) { try await store.disableMobileApps(user: "alice", at: 1) }
    }

    @Test("bad files fail with an error that names the file and the problem", arguments: [
        ("not json", "not valid JSON"),
        ("[]", "top level must be a JSON object"),
        ("{\"global_revoked_before\": true}", "global_revoked_before must be a non-negative integer"),
        ("{\"global_revoked_before\": 1.5}", "not a non-integer number"),
        ("{\"global_revoked_before\": -1}", "global_revoked_before must be a non-negative integer"),
        ("{\"global_revoked_before\": \"1714564800\"}", "not a string"),
        ("{\"global_revoked_before\": 1e30}", "not a number that large"),
        ("{\"global_revokd_before\": 1}", "unknown key \"global_revokd_before\""),
        ("{\"users\": []}", "\"users\" must be an object"),
        ("{\"users\": {\"alice\": 5}}", "users[\"alice\"] must be an object"),
        ("{\"users\": {\"alice\": {\"revoked_before\": false}}}", "users[\"alice\"].revoked_before"),
        ("{\"users\": {\"alice\": {\"revoked\": 1}}}", "unknown key \"revoked\" in users[\"alice\"]"),
        ("{\"users\": {\"\": {}}}", "not a valid user id: the user id is empty"),
        ("{\"users\": {\"a\\u0000b\": {}}}", "not a valid user id: the user id contains a control character"),
        ("{\"users\": {\"alice\": {}, \"alice\": {\"revoked_before\": 1}}}", "users[\"alice\"] appears twice"),
        ("{\"users\": {\"alice\": {}}, \"users\": {}}", "\"users\" appears twice at the top level"),
    ])
    func badFiles(text: String, expected: String) async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, text)
        let error = await expectStoreError(.invalidStoreFile) { try await JSONFileCutoffStore(path: path).load() }
        #expect(error?.message.hasPrefix("cutoffs file \(path): ") == true, "\(String(describing: error))")
        #expect(error?.message.contains(expected) == true, "\(String(describing: error))")
    }

    @Test("a missing file is unavailable, a too large one is refused")
    func missingAndTooLarge() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        let missing = await expectStoreError(.storeUnavailable) { try await JSONFileCutoffStore(path: path).load() }
        #expect(missing?.message.contains(path) == true)
        await expectStoreError(.storeUnavailable) { try await JSONFileCutoffStore(path: path).changeMarker() }
        try writeFile(path, "{\"users\": {}}")
        await expectStoreError(.invalidStoreFile) { try await JSONFileCutoffStore(path: path, maxFileBytes: 5).load() }
    }

    @Test("the change marker changes when the file is replaced")
    func changeMarker() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("cutoffs.json")
        try writeFile(path, "{}")
        let store = JSONFileCutoffStore(path: path)
        let first = try await store.changeMarker()
        #expect(try await store.changeMarker() == first)
        try writeFile(directory.file("new.json"), "{\"global_revoked_before\": 10}")
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: directory.file("new.json"), toPath: path)
        #expect(try await store.changeMarker() != first)
    }
}

extension JSONFileCutoffStore {
    static func parseText(_ text: String) throws -> CutoffTable {
        try self.parse(Data(text.utf8), fileDescription: "test")
    }
}
