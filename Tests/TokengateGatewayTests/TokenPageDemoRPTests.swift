//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import NIOPosix
import Testing
import TokengateClient
import TokengateDemo
import TokengateGateway
import TokengateTokens

/// The demo RP on its own, over plain HTTP on loopback (behind the gateway it is only reached over TLS).
@Suite(.serialized)
struct TokenPageDemoRPTests {
    /// The cutoff changes the RP reported.
    final class Changes: @unchecked Sendable {
        // @unchecked: every access goes through `lock`.
        private let lock = NSLock()
        private var list: [DemoRP.CutoffChange] = []

        func append(_ change: DemoRP.CutoffChange) {
            self.lock.lock()
            self.list.append(change)
            self.lock.unlock()
        }

        var all: [DemoRP.CutoffChange] {
            self.lock.lock()
            defer { self.lock.unlock() }
            return self.list
        }
    }

    private func withRP(_ body: (DemoRP, TokenPageTestClock, Changes, TokenVerifier) async throws -> Void) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-rp")
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        let verifier = TokenVerifier(keys: try KeySet(jwks: Array(keys.publicJWKS.utf8)))
        let clock = TokenPageTestClock()
        let changes = Changes()
        let rp = try await DemoRP.start(port: 0, group: group, signer: signer, now: { clock.now }) { changes.append($0) }
        do {
            try await body(rp, clock, changes, verifier)
        } catch {
            try? await rp.stop()
            try? await group.shutdownGracefully()
            throw error
        }
        try? await rp.stop()
        try? await group.shutdownGracefully()
    }

    private func curl(_ rp: DemoRP, _ path: String, _ arguments: [String] = []) throws -> Curl.Result {
        try Curl.run(arguments + ["http://127.0.0.1:\(rp.port)\(path)"], caFile: nil)
    }

    private func login(_ rp: DemoRP, user: String = "alice", password: String = "pw", returnTo: String = "/token") throws -> Curl.Result {
        try self.curl(rp, "/login", ["--data-urlencode", "user=\(user)", "--data-urlencode", "password=\(password)", "--data-urlencode", "return_to=\(returnTo)"])
    }

    private func sessionCookie(_ result: Curl.Result) -> String? {
        result.headers("set-cookie").first { $0.hasPrefix("session=") }
            .map { String($0.dropFirst("session=".count).prefix { $0 != ";" }) }
    }

    @Test func loginFormEscapesTheReturnAddress() async throws {
        try await self.withRP { rp, _, _, _ in
            let form = try self.curl(rp, "/login?return_to=%2Ftoken%3Fapp%3Dios")
            #expect(form.status == 200)
            #expect(form.body.contains("name=\"return_to\" value=\"/token?app=ios\""))
            let hostile = try self.curl(rp, "/login?return_to=%22%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E")
            #expect(!hostile.body.contains("<script>"))
            #expect(hostile.body.contains("&quot;&gt;&lt;script&gt;"))
        }
    }

    @Test func loginSetsAVerifiableSessionCookieAndReturnsSameSiteOnly() async throws {
        try await self.withRP { rp, clock, _, verifier in
            let result = try self.login(rp)
            #expect(result.status == 303)
            #expect(result.header("location") == "/token")
            let setCookie = try #require(result.headers("set-cookie").first)
            #expect(setCookie.hasSuffix("; HttpOnly; Secure; SameSite=Lax; Path=/"))
            let session = try #require(self.sessionCookie(result))
            guard case .valid(let token) = verifier.verify(session, accept: .session, cutoffs: .empty, now: clock.now) else {
                Issue.record("the session cookie does not verify as a session token")
                return
            }
            #expect(token.subject == "alice")
            for hostile in ["//evil.example", "/\\evil.example", "https://evil.example", "%2F%2Fevil.example", "/\r\nX: y", "javascript:alert(1)"] {
                let redirected = try self.login(rp, returnTo: hostile)
                #expect(redirected.status == 303, "\(hostile)")
                #expect(redirected.header("location") == "/", "\(hostile)")
            }
        }
    }

    @Test func badCredentialsAreRefused() async throws {
        try await self.withRP { rp, _, _, _ in
            let unknownUser = try self.login(rp, user: "mallory")
            let emptyPassword = try self.login(rp, password: "")
            let twoUsers = try self.curl(rp, "/login", ["--data", "user=alice&user=bob&password=x"])
            #expect(unknownUser.status == 401)
            #expect(emptyPassword.status == 401)
            #expect(twoUsers.status == 401)
            #expect(unknownUser.headers("set-cookie").isEmpty)
        }
    }

    @Test func whoami() async throws {
        try await self.withRP { rp, _, _, _ in
            let session = try #require(self.sessionCookie(try self.login(rp, user: "bob")))
            let known = try self.curl(rp, "/whoami", ["-H", "Cookie: theme=x; session=\(session)"])
            #expect(known.status == 200)
            #expect(known.header("x-user-id") == "bob")
            #expect(try self.curl(rp, "/whoami").status == 401)
            #expect(try self.curl(rp, "/whoami", ["-H", "Cookie: session=forged.token.value"]).status == 401)
            #expect(try self.curl(rp, "/whoami", ["-H", "X-Tokengate-User: carol"]).header("x-user-id") == "carol")
        }
    }

    @Test func passwordChangeEndsOldSessionsAndReportsTheCutoff() async throws {
        try await self.withRP { rp, clock, changes, _ in
            let old = try #require(self.sessionCookie(try self.login(rp)))
            clock.advance(by: 10)
            let changed = try self.curl(rp, "/account/password", ["-H", "Cookie: session=\(old)", "--data", "password=new-secret"])
            #expect(changed.status == 200)
            #expect(changes.all == [DemoRP.CutoffChange(user: "alice", kind: .passwordChanged, at: clock.now)])
            let fresh = try #require(self.sessionCookie(changed), "this browser gets a new session")
            #expect(try self.curl(rp, "/whoami", ["-H", "Cookie: session=\(old)"]).status == 401)
            #expect(try self.curl(rp, "/whoami", ["-H", "Cookie: session=\(fresh)"]).status == 200)
            #expect(try self.login(rp, password: "pw").status == 401)
            #expect(try self.login(rp, password: "new-secret").status == 303)
            #expect(try self.curl(rp, "/account/password", ["--data", "password=x"]).status == 401)
        }
    }

    @Test func disableMobileAppsReportsTheApiCutoff() async throws {
        try await self.withRP { rp, clock, changes, _ in
            let result = try self.curl(rp, "/account/disable-mobile-apps", ["-X", "POST", "-H", "X-Tokengate-User: alice"])
            #expect(result.status == 200)
            #expect(changes.all == [DemoRP.CutoffChange(user: "alice", kind: .mobileAppsDisabled, at: clock.now)])
            #expect(try self.curl(rp, "/account/disable-mobile-apps", ["-X", "POST"]).status == 401)
        }
    }
}
