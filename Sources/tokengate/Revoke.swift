//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import TokengateConfig
import Logging
import TokengateStores

/// `tokengate revoke`: writes a cutoff through the configured store, the way the admin API does. Every
/// running gateway picks it up (SQLite: on its next poll, within a second).
struct Revoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Revoke a user's tokens (password changed, or --api-only: disable mobile apps), or everyone's (--all)."
    )

    @Option(help: "The gateway's configuration file (its `cutoffs` store is written).")
    var config: String

    @Option(help: "The user id whose tokens to revoke.")
    var user: String?

    @Flag(name: .customLong("api-only"), help: "Revoke only api tokens (\"disable mobile apps\"); browser sessions stay.")
    var apiOnly = false

    @Flag(help: "Revoke every token of every user issued before the cutoff (the emergency switch).")
    var all = false

    @Option(help: "The cutoff: UNIX seconds or RFC 3339 (default: now).")
    var at: String?

    @Flag(help: "Allow the cutoff to move backward (re-validating tokens it had killed).")
    var force = false

    func validate() throws {
        if self.all == (self.user != nil) {
            throw ValidationError("give exactly one of --user ID or --all")
        }
        if self.all && self.apiOnly {
            throw ValidationError("--api-only applies to one user; --all revokes every token")
        }
    }

    func run() async throws {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(path: self.config, checkFiles: false)
        } catch {
            fail("\(error)")
        }
        let now = Int64(Date().timeIntervalSince1970)
        var at = now
        if let text = self.at {
            do {
                at = try CutoffTime.parse(text)
            } catch {
                fail("--at: \(error)")
            }
            // As the admin API: a cutoff far in the future would also reject every token issued after it
            // until then (a typo could lock a user, or everyone, out for centuries).
            if at > now + 300 {
                fail("--at is more than 5 minutes in the future; a cutoff takes effect for tokens issued before it")
            }
        }
        let opened: CutoffStoreFactory.Opened
        do {
            if case .file(let path) = configuration.cutoffs {
                fail("the cutoff store \(path) is a read-only JSON file; edit the file, or configure a sqlite or postgres store")
            }
            opened = try await CutoffStoreFactory.open(configuration.cutoffs, logger: Logger(label: "tokengate.revoke"))
        } catch {
            fail("cannot open the cutoff store: \(error)")
        }
        let store = opened.store
        let storeTask = opened.run.map { run in Task { await run() } }
        defer { storeTask?.cancel() }
        do {
            let result: CutoffWriteResult
            if self.all {
                result = try await store.revokeAll(at: at, force: self.force)
            } else if self.apiOnly {
                result = try await store.disableMobileApps(user: self.user!, at: at, force: self.force)
            } else {
                result = try await store.passwordChanged(user: self.user!, at: at, force: self.force)
            }
            try await store.close()
            let what = self.all ? "all users" : "user \(self.user!)"
            let kind = self.apiOnly ? "api tokens" : "tokens"
            print(result.changed ? "revoked \(kind) of \(what) issued before \(result.cutoff)" : "unchanged: \(what) already has cutoff \(result.cutoff)")
        } catch {
            fail("\(error)")
        }
    }
}
