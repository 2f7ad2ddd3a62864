//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import TokengateConfig
import Logging
import TokengateStores
import TokengateTokens

/// `tokengate revoke`: writes a cutoff through the configured store, the way the admin API does. Every
/// running gateway picks it up (SQLite: on its next poll, within a second).
struct Revoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: Self.name,
        abstract: "Revoke a user's tokens (password changed, or --api-only: disable mobile apps), one device's (--device), or everyone's (--all).",
        discussion: """
            Exit status: 0 done (moved forward, moved back with --force, or already so); 64 usage error; \
            65 refused: the cutoff would move backward (use --force); 69 the store cannot be used as it is \
            (SQLite file missing or not a database, schema too new); 75 the store is unreachable, locked or busy: \
            retry later; 78 the configuration cannot be used (unreadable, invalid, or a read-only store). \
            With --device: 0 revoked (or revoked already), 65 the user has no such device, 78 the store keeps no \
            devices (a JSON file).
            """
    )

    static let name = "revoke"

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

    @Option(help: "Revoke only this device of --user (its id from the admin API's device list): every token of it.")
    var device: String?

    @Option(
        help: """
            The JWT issuer of --user: the name of a `kind: jwt` item of `issuers:` (each issuer's users are \
            apart: its alice is not the token page's). Default: the top-level keys' issuer (`tokens`).
            """)
    var issuer: String?

    /// The key the store keeps the user's cutoffs under (``IssuerScopedUser``).
    var storedUser: String {
        let issuer = self.issuer == JWTIssuerConfiguration.topLevelName ? nil : self.issuer
        return IssuerScopedUser.key(issuer: issuer, user: self.user ?? "")
    }

    func validate() throws {
        if self.all == (self.user != nil) {
            throw ValidationError("give exactly one of --user ID or --all")
        }
        if let device = self.device {
            guard DeviceID(device) != nil else {
                throw ValidationError("--device must be a device id: 22 characters of base64url")
            }
            if self.all || self.apiOnly || self.force || self.at != nil {
                throw ValidationError("--device revokes one device of --user now; it takes no --all, --api-only, --force or --at")
            }
        }
        if self.all && self.apiOnly {
            throw ValidationError("--api-only applies to one user; --all revokes every token")
        }
        if let issuer = self.issuer {
            if self.all { throw ValidationError("--issuer names the issuer of --user; --all revokes every token") }
            if self.device != nil, issuer != JWTIssuerConfiguration.topLevelName {
                throw ValidationError("--device names a device of the token page's issuer; it takes no --issuer")
            }
        }
    }

    func run() async throws {
        let configuration: GatewayConfiguration
        do {
            configuration = try GatewayConfiguration.load(path: self.config, checkFiles: false)
        } catch {
            fail("\(error)", status: .configuration)
        }
        if let issuer = self.issuer, issuer != JWTIssuerConfiguration.topLevelName,
            configuration.jwtIssuers[issuer] == nil
        {
            let names = [JWTIssuerConfiguration.topLevelName] + configuration.jwtIssuers.keys.sorted()
            fail("--issuer: no JWT issuer is named \(issuer) (issuers: \(names.joined(separator: ", ")))", status: .usage)
        }
        let now = Int64(Date().timeIntervalSince1970)
        var at = now
        if let text = self.at {
            do {
                at = try CutoffTime.parse(text)
            } catch {
                fail("--at: \(error)", status: .usage)
            }
            // As the admin API: a cutoff far in the future would also reject every token issued after it
            // until then (a typo could lock a user, or everyone, out for centuries).
            if at > now + 300 {
                fail(
                    "--at is more than 5 minutes in the future; a cutoff takes effect for tokens issued before it",
                    status: .usage
                )
            }
        }
        if case .file(let path) = configuration.cutoffs {
            fail(
                "the cutoff store \(path) is a read-only JSON file; edit the file, or configure a sqlite or "
                    + "postgres store",
                status: .configuration
            )
        }
        let opened: CutoffStoreFactory.Opened
        do {
            opened = try await CutoffStoreFactory.open(
                configuration.cutoffs,
                logger: Logger(label: "tokengate.revoke"),
                for: .oneShotWrite
            )
        } catch {
            fail("cannot open the cutoff store: \(error)", status: ExitStatus(forStoreError: error))
        }
        let store = opened.store
        let storeTask = opened.run.map { run in Task { await run() } }
        defer { storeTask?.cancel() }
        if let text = self.device, let device = DeviceID(text) {
            await self.revokeDevice(device, user: self.user!, at: now, in: store)
            return
        }
        do {
            // Only a forced write can move a cutoff back, and only the value before it tells whether it did.
            let before = self.force ? try await self.storedCutoff(in: store) : nil
            let result: CutoffWriteResult
            if self.all {
                result = try await store.revokeAll(at: at, force: self.force)
            } else if self.apiOnly {
                result = try await store.disableMobileApps(user: self.storedUser, at: at, force: self.force)
            } else {
                result = try await store.passwordChanged(user: self.storedUser, at: at, force: self.force)
            }
            try await store.close()
            print(self.report(result, before: before))
        } catch {
            fail("\(error)", status: ExitStatus(forStoreError: error))
        }
    }

    /// Revokes one device; every running gateway enforces it within its feed poll (SQLite) or at once (PostgreSQL's
    /// notification).
    private func revokeDevice(_ device: DeviceID, user: String, at: Int64, in store: any CutoffStore) async {
        do {
            let revocation = try await store.revokeDevice(user: user, device: device, at: at)
            try await store.close()
            let record = revocation.record
            if revocation.changed {
                print("revoked device \(device) (\(record.app)) of user \(user): every token of it is refused")
            } else {
                print("unchanged: device \(device) of user \(user) was revoked at \(Self.describe(record.revokedAt ?? at))")
            }
        } catch let error as CutoffStoreError where error.code == .unknownDevice {
            try? await store.close()
            fail("\(error)", status: .dataError)
        } catch let error as CutoffStoreError where error.code == .noDevices {
            try? await store.close()
            fail("\(error)", status: .configuration)
        } catch {
            try? await store.close()
            fail("\(error)", status: ExitStatus(forStoreError: error))
        }
    }

    /// The cutoff the write is about as stored now (`.some(nil)`: none), read before a forced write.
    private func storedCutoff(in store: any CutoffStore) async throws -> Int64?? {
        // Any user's lookup carries the global cutoff; the empty id names nobody.
        let lookup = try await store.lookup(user: self.storedUser)
        if self.all {
            return .some(lookup.globalRevokedBefore)
        }
        return .some(self.apiOnly ? lookup.user.apiRevokedBefore : lookup.user.revokedBefore)
    }

    /// What the write did, in words: a cutoff moved forward, moved back (only with `--force`), or left as it was.
    ///
    /// - Parameter before: The stored cutoff before a forced write; `nil` when the write was not forced (it
    ///   then only moves a cutoff forward, or changes nothing).
    func report(_ result: CutoffWriteResult, before: Int64??) -> String {
        let issuer = self.issuer.map { $0 == JWTIssuerConfiguration.topLevelName ? "" : " of issuer \($0)" } ?? ""
        let what = self.all ? "all users" : "user \(self.user!)\(issuer)"
        let kind = self.apiOnly ? "api tokens" : "tokens"
        let cutoff = Self.describe(result.cutoff)
        if let before, let previous = before {
            if previous > result.cutoff {
                let name = self.apiOnly ? "api-token cutoff" : "cutoff"
                return "moved the \(name) of \(what) back from \(Self.describe(previous)) to \(cutoff): \(kind) issued "
                    + "between the two are accepted again (unless another cutoff rejects them)"
            }
            if previous == result.cutoff {
                return "unchanged: \(what) already has cutoff \(cutoff)"
            }
        }
        guard result.changed else {
            return "unchanged: \(what) already has cutoff \(cutoff)"
        }
        return "revoked \(kind) of \(what) issued before \(cutoff)"
    }

    /// UNIX seconds, and the same time in RFC 3339 (UTC) for the reader.
    private static func describe(_ time: Int64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return "\(time) (\(formatter.string(from: Date(timeIntervalSince1970: TimeInterval(time)))))"
    }
}
