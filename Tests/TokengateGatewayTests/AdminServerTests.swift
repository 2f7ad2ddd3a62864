//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TokengateAdmin
import TokengateConfig
import TokengateHTTP
import TokengateTLS

@testable import TokengateGateway

/// The admin listener's transport limits, over real sockets on loopback: silent, half-sent and idle connections
/// are closed at the admin deadlines, a connection NIO answered 400 is closed, and at the cap a new connection
/// takes the place of the one waiting longest, so a flood of silent connections cannot keep the probes out.
@Suite(.serialized)
struct AdminServerTests {
    /// Runs `body` against an admin listener on a free loopback port that answers every request 200 (`/slow`
    /// after 1.5 s).
    private func withAdmin(
        secret: [UInt8]? = nil,
        tls: TLSServerContext? = nil,
        requestTimeout: Duration = AdminServer.defaultRequestTimeout,
        idleTimeout: Duration = AdminServer.defaultIdleTimeout,
        maxConnections: Int = AdminServer.defaultMaxConnections,
        _ body: (Int) async throws -> Void
    ) async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let server = try await AdminServer.start(
            host: "127.0.0.1",
            port: 0,
            credentials: AdminCredentials(.init(secret: secret, tls: tls)),
            requestTimeout: requestTimeout,
            idleTimeout: idleTimeout,
            maxConnections: maxConnections,
            group: group,
            logger: Logger(label: "admin-server-test")
        ) { request in
            if request.path == "/slow" { try? await Task.sleep(for: .milliseconds(1500)) }
            return .init(status: 200, body: "{\"status\":\"ok\"}")
        }
        do {
            try await body(try #require(server.localAddress?.port))
        } catch {
            await server.stop()
            try await group.shutdownGracefully()
            throw error
        }
        await server.stop()
        try await group.shutdownGracefully()
    }

    /// With a secret every path but the probes needs `Authorization: Bearer <secret>`; the 401 names the
    /// scheme in `WWW-Authenticate` (RFC 9110 §11.6.1), and with a secret any `Host` is allowed.
    @Test func theSecretIsRequiredAndThe401SaysHow() async throws {
        try await self.withAdmin(secret: Array("s3cret-test-only".utf8)) { port in
            let base = "http://127.0.0.1:\(port)"
            let missing = try Curl.run(["\(base)/metrics"], caFile: nil)
            #expect(missing.status == 401 && missing.body.contains("\"unauthorized\""))
            #expect(missing.header("www-authenticate") == #"Bearer realm="tokengate-admin""#, "\(missing.headers)")
            #expect(try Curl.run(["-H", "Authorization: Bearer wrong", "\(base)/metrics"], caFile: nil).status == 401)
            let named = try Curl.run(["-H", "Authorization: Bearer s3cret-test-only", "-H", "Host: admin.internal:9901", "\(base)/metrics"], caFile: nil)
            #expect(named.status == 200, "a secret allows any Host: \(named.body)")
            #expect(try Curl.run(["\(base)/healthz"], caFile: nil).status == 200, "the probes stay open")
        }
    }

    /// A request the listener will refuse is answered on its head and the connection closed, without waiting
    /// for a body: before, the whole body was read first (a 50 MB one took a second, a trickled one as long as
    /// its sender liked), so anyone reaching the port could hold the admin connections the probes need.
    @Test func refusalsAreAnsweredOnTheHeadWithoutReadingTheBody() async throws {
        try await self.withAdmin(secret: Array("s3cret-test-only".utf8)) { port in
            let lines = try SocketProbe.run(
                port: port,
                """
                probe([b'POST /admin/revoke-all HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 50000000\\r\\n\\r\\n', b'x' * 1000])
                probe([b'POST /admin/revoke-all HTTP/1.1\\r\\nHost: localhost\\r\\nAuthorization: Bearer s3cret-test-only\\r\\nContent-Length: 50000000\\r\\n\\r\\n', b'x' * 1000])
                probe([b'POST /admin/revoke-all HTTP/1.1\\r\\nHost: localhost\\r\\nAuthorization: Bearer s3cret-test-only\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n', b'11170\\r\\n' + b'x' * 70000 + b'\\r\\n'])
                """
            )
            try #require(lines.count == 3, "\(lines)")
            let seconds = lines.map { Double($0.last ?? "") ?? 99 }
            #expect(lines[0].first == "HTTP/1.1_401_Unauthorized" && seconds[0] < 2, "unauthenticated: \(lines[0])")
            #expect(lines[1].first == "HTTP/1.1_413_Payload_Too_Large" && seconds[1] < 2, "declared too large: \(lines[1])")
            #expect(lines[2].first == "HTTP/1.1_413_Payload_Too_Large" && seconds[2] < 2, "chunked past the limit: \(lines[2])")
        }
    }

    /// A web page in the operator's browser must not reach a loopback admin listener without a secret: a
    /// cross-site "simple" POST (no preflight) could force a cutoff back and un-revoke tokens, and DNS
    /// rebinding could read it as same-origin. Requests carrying `Origin` or a `Sec-Fetch-Site` other than
    /// `none` are refused, and so is a `Host` that is neither `localhost` nor an address; tools (curl) pass.
    @Test func refusesRequestsFromWebPagesAndRebindingHosts() async throws {
        try await self.withAdmin { port in
            func status(_ headers: [String], method: String = "POST") throws -> (Int, String) {
                let result = try Curl.run(
                    ["-X", method, "--data", #"{"at":0,"force":true}"#] + headers.flatMap { ["-H", $0] }
                        + ["http://127.0.0.1:\(port)/admin/users/victim/password-changed"],
                    caFile: nil
                )
                return (result.status, result.body)
            }
            let crossSite = try status(["Origin: https://attacker.example", "Sec-Fetch-Site: cross-site", "Content-Type: text/plain"])
            #expect(crossSite.0 == 403 && crossSite.1.contains("\"cross_site_request\""), "\(crossSite)")
            #expect(try status(["Origin: null"]).0 == 403, "a sandboxed page sends Origin: null")
            #expect(try status(["Sec-Fetch-Site: same-origin"]).0 == 403, "a rebinding page is same-origin")
            let rebinding = try status(["Host: attacker.example:\(port)"], method: "GET")
            #expect(rebinding.0 == 403 && rebinding.1.contains("\"host_not_allowed\""), "\(rebinding)")
            for allowed in [[], ["Sec-Fetch-Site: none"], ["Host: localhost:\(port)"], ["Host: LOCALHOST"], ["Host: [::1]:\(port)"]] {
                #expect(try status(allowed).0 == 200, "\(allowed)")
            }
        }
    }

    /// The admin listener's `tls` keys, built by `serve`'s own path (``AdminServer/makeTLSContext(_:)``):
    /// `min_version: "1.3"` refuses a TLS 1.2 handshake, and `server_names` choose the certificate by SNI, the
    /// first one answering a client without SNI.
    @Test func adminTLSHonoursMinVersionAndServerNames() async throws {
        let directory = NSTemporaryDirectory() + "tokengate-admin-tls-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try GatewayTLSOptionTests.writeCertificate("default", hostnames: ["localhost"], in: directory)
        try GatewayTLSOptionTests.writeCertificate("named", hostnames: ["admin.example.com"], in: directory)
        func path(_ name: String) -> ConfigPath { ConfigPath(path: "\(directory)/\(name)", original: name) }
        let context = try AdminServer.makeTLSContext(
            TLSListenerConfiguration(
                certificates: [
                    CertificateConfiguration(cert: path("default.crt"), key: path("default.key")),
                    CertificateConfiguration(cert: path("named.crt"), key: path("named.key"), serverNames: ["admin.example.com"]),
                ],
                minimumVersion: .tls13
            )
        )
        try await self.withAdmin(tls: context) { port in
            let (oldCode, oldOutput, _) = try Curl.process(
                "/usr/bin/openssl",
                ["s_client", "-connect", "127.0.0.1:\(port)", "-tls1_2", "-servername", "localhost"],
                input: Data("Q\n".utf8)
            )
            #expect(oldCode != 0 && oldOutput.contains("Cipher is (NONE)"), "TLS 1.2 was accepted: \(oldOutput)")
            #expect(try GatewayTLSOptionTests.servedNames(port: port, serverName: "admin.example.com") == "DNS:admin.example.com")
            #expect(try GatewayTLSOptionTests.servedNames(port: port, serverName: nil) == "DNS:localhost")
            let answer = try Curl.run(
                ["--resolve", "admin.example.com:\(port):127.0.0.1", "https://admin.example.com:\(port)/healthz"],
                caFile: "\(directory)/named.crt"
            )
            #expect(answer.status == 200, "\(answer.stderr)")
        }
    }

    /// A silent connection, a head that stops halfway and a body that stops halfway are all closed at the
    /// request deadline, counted from the connection's start, without an answer; a keep-alive connection is
    /// closed once idle for the idle timeout after its answer. Before, a silent connection (and a stalled body)
    /// stayed for the public `idle_timeout` (60 s), renewable, which let 256 of them lock the listener.
    @Test func closesSilentHalfSentAndIdleConnectionsAtTheAdminDeadlines() async throws {
        try await self.withAdmin(requestTimeout: .seconds(1), idleTimeout: .seconds(3)) { port in
            let lines = try SocketProbe.run(
                port: port,
                """
                probe([])
                probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n'])
                probe([b'POST /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 10\\r\\n\\r\\nabc'])
                probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n'])
                """
            )
            try #require(lines.count == 4, "\(lines)")
            let seconds = lines.map { Double($0.last ?? "") ?? 99 }
            #expect(lines[0].first == "closed" && seconds[0] > 0.7 && seconds[0] < 1.8, "silent: \(lines[0])")
            #expect(lines[1].first == "closed" && seconds[1] > 0.7 && seconds[1] < 1.8, "half-sent head: \(lines[1])")
            #expect(lines[2].first == "closed" && seconds[2] > 0.7 && seconds[2] < 1.8, "half-sent body: \(lines[2])")
            #expect(lines[3].first == "HTTP/1.1_200_OK" && seconds[3] > 2.5 && seconds[3] < 4.5, "keep-alive: \(lines[3])")
        }
    }

    /// A head that arrives in pieces within the deadline is served; between requests only the idle timeout
    /// applies, so a keep-alive connection may wait longer than the head deadline for its next request.
    @Test func servesASlowButTimelyHeadAndAWaitingKeepAliveConnection() async throws {
        try await self.withAdmin(requestTimeout: .seconds(2), idleTimeout: .seconds(5)) { port in
            let lines = try SocketProbe.run(
                port: port,
                """
                probe([b'GET /healthz HTTP/1.1\\r\\n', b'Host: localhost\\r\\n', b'\\r\\n'], 0.5)
                probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n', b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n'], 3)
                """
            )
            try #require(lines.count == 2, "\(lines)")
            #expect(lines[0].first == "HTTP/1.1_200_OK", "\(lines[0])")
            #expect(lines[1].first == "HTTP/1.1_200_OK" && lines[1].dropFirst().first == "2", "\(lines[1])")
        }
    }

    /// Bytes that are not HTTP/1.1 get NIO's 400 `Connection: close`, and then the connection is closed at
    /// once; nothing after them is read. Before the fix the socket stayed open until the client gave up.
    @Test func closesTheConnectionAfterAnsweringBytesThatAreNotHTTP() async throws {
        try await self.withAdmin(idleTimeout: .seconds(30)) { port in
            let lines = try SocketProbe.run(
                port: port,
                """
                probe([b'GET /healthz HTTP/1.1\\nHost: localhost\\n\\nGET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n'])
                probe([b'POST /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nContent-Length: 2\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n'])
                probe([b'\\x16\\x03\\x01\\x00\\xa5\\x01\\x00\\x00\\xa1\\x03\\x03'])
                """
            )
            try #require(lines.count == 3, "\(lines)")
            for line in lines {
                #expect(line.first == "HTTP/1.1_400_Bad_Request", "\(line)")
                #expect(line.dropFirst().first == "1", "exactly one answer: \(line)")
                #expect((Double(line.last ?? "") ?? 99) < 2, "closed right after the 400: \(line)")
            }
        }
    }

    /// The review's lock-out: more silent connections than the cap (the real one, 256) no longer keep `/healthz`
    /// out. Each new connection takes the place of the one that has waited longest, so the probes are answered
    /// during the flood, and the flood's connections go at the request deadline. Before, the 257th connection
    /// on was closed as it arrived, the probes with it, for as long as the flood was renewed.
    @Test func aFloodOfSilentConnectionsDoesNotKeepTheProbesOut() async throws {
        try await self.withAdmin(requestTimeout: .seconds(3)) { port in
            let lines = try SocketProbe.run(
                port: port,
                """
                held = [socket.create_connection(('127.0.0.1', port), timeout=6) for _ in range(300)]
                time.sleep(0.3)
                def closed(sockets):
                    count = 0
                    for s in sockets:
                        s.setblocking(False)
                        try:
                            count += s.recv(1) == b''
                        except BlockingIOError:
                            pass
                        except OSError:
                            count += 1
                    return count
                probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n'])
                probe([b'GET /readyz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n'])
                time.sleep(0.3)
                print('closed', closed(held[:45]), closed(held[46:]))
                time.sleep(3)
                print('closed', closed(held), 0)
                """
            )
            try #require(lines.count == 4, "\(lines)")
            #expect(lines[0].first == "HTTP/1.1_200_OK" && (Double(lines[0].last ?? "") ?? 99) < 1, "during the flood: \(lines[0])")
            #expect(lines[1].first == "HTTP/1.1_200_OK" && (Double(lines[1].last ?? "") ?? 99) < 1, "during the flood: \(lines[1])")
            // 44 over the cap and one for the first probe, the oldest first; the second probe finds the first
            // one's place free, unless it arrives before that place is given back (then the 46th goes too).
            #expect(lines[2] == ["closed", "45", "0"], "the longest waiting went, and only they: \(lines[2])")
            #expect(lines[3] == ["closed", "300", "0"], "all gone at the request deadline: \(lines[3])")
        }
    }

    /// At the cap the connection that has waited longest goes, not the newest; a connection whose request is
    /// being served is never taken, so with every place serving a new connection is closed as it arrives; once
    /// places are free, new ones are served again.
    @Test func atTheCapTheLongestWaitingConnectionGoesButNoneBeingServed() async throws {
        try await self.withAdmin(maxConnections: 2) { port in
            let lines = try SocketProbe.run(
                port: port,
                """
                healthz = b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n'
                def state(s):
                    s.setblocking(False)
                    try:
                        return 'closed' if s.recv(1) == b'' else 'data'
                    except BlockingIOError:
                        return 'open'
                    except OSError:
                        return 'closed'
                held = []
                for _ in range(2):
                    held.append(socket.create_connection(('127.0.0.1', port), timeout=6))
                    time.sleep(0.1)
                probe([healthz])
                time.sleep(0.2)
                print('held', state(held[0]), state(held[1]))
                slow = []
                for _ in range(2):
                    s = socket.create_connection(('127.0.0.1', port), timeout=6)
                    s.sendall(b'GET /slow HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n')
                    slow.append(s)
                    time.sleep(0.1)
                probe([healthz])
                print('slow', *[s.recv(4096).split(b'\\r\\n')[0].decode().replace(' ', '_') for s in slow])
                time.sleep(0.2)
                probe([healthz])
                """
            )
            try #require(lines.count == 5, "\(lines)")
            #expect(lines[0].first == "HTTP/1.1_200_OK", "in place of the longest waiting: \(lines[0])")
            #expect(lines[1] == ["held", "closed", "open"], "the older one went: \(lines[1])")
            #expect(lines[2].first == "closed", "every place serving: \(lines[2])")
            #expect(lines[3] == ["slow", "HTTP/1.1_200_OK", "HTTP/1.1_200_OK"], "served, not evicted: \(lines[3])")
            #expect(lines[4].first == "HTTP/1.1_200_OK", "places free again: \(lines[4])")
        }
    }

    /// A request with two `Host` fields, an empty one, or (HTTP/1.1) none, is answered 400 and its connection closed, with a
    /// secret or without, before the secret is asked for. Before, only the first `Host` was read (the rebinding
    /// check passed `localhost` and ignored a second name), and an empty one passed wherever any name may.
    @Test func refusesARepeatedOrEmptyHost() async throws {
        let requests = """
            probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nHost: attacker.example\\r\\n\\r\\n'])
            probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nhost: localhost\\r\\n\\r\\n'])
            probe([b'GET /healthz HTTP/1.1\\r\\nHost:\\r\\n\\r\\n'])
            probe([b'GET /healthz HTTP/1.1\\r\\nHost:   \\r\\n\\r\\n'])
            probe([b'GET /metrics HTTP/1.1\\r\\nHost:\\r\\n\\r\\n'])
            probe([b'GET /healthz HTTP/1.1\\r\\n\\r\\n'])
            probe([b'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n'])
            probe([b'GET /healthz HTTP/1.0\\r\\n\\r\\n'])
            """
        for secret in [nil, Array("s3cret-test-only".utf8)] {
            try await self.withAdmin(secret: secret) { port in
                let lines = try SocketProbe.run(port: port, requests)
                try #require(lines.count == 8, "\(lines)")
                for line in lines.prefix(6) {
                    #expect(line.first == "HTTP/1.1_400_Bad_Request", "secret \(secret != nil): \(line)")
                    #expect((Double(line.last ?? "") ?? 99) < 2, "closed after the 400: \(line)")
                }
                #expect(lines[6].first == "HTTP/1.1_200_OK", "one Host: \(lines[6])")
                #expect(lines[7].first == "HTTP/1.0_200_OK", "HTTP/1.0 predates Host: \(lines[7])")
            }
        }
        #expect(AdminConnectionHandler.hostProblem(["host": "localhost"], version: .http1_1) == nil)
        #expect(AdminConnectionHandler.hostProblem([:], version: .http1_0) == nil, "HTTP/1.0 clients send none")
        #expect(
            AdminConnectionHandler.hostProblem([:], version: .http1_1) == "a request needs exactly one Host header",
            "RFC 9112 §3.2: an HTTP/1.1 request without Host gets 400")
        #expect(AdminConnectionHandler.hostProblem(["host": ""], version: .http1_1) == "the Host header is empty")
        #expect(AdminConnectionHandler.hostProblem(HTTPHeaders([("host", "a"), ("Host", "a")]), version: .http1_1) == "a request needs exactly one Host header")
    }
}

/// The host rule of ``AdminBrowserGuard`` on its own: the names a loopback listener is reached by.
@Suite struct AdminBrowserGuardTests {
    @Test func loopbackStyleHosts() {
        for good in ["localhost", "LocalHost:9901", "127.0.0.1", "127.0.0.1:9901", "10.1.2.3:80", "[::1]", "[::1]:9901", "[::ffff:127.0.0.1]"] {
            #expect(AdminBrowserGuard.isLoopbackStyleHost(good), "\(good)")
        }
        for bad in ["attacker.example", "attacker.example:9901", "localhost.attacker.example", "127.0.0.1.nip.io", "1.2.3",
                    "256.0.0.1", "127.0.0.1:", "127.0.0.1:123456", "[::1", "[::1]x", "[]", "", "localhost:abc", "0x7f.0.0.1"]
        {
            #expect(!AdminBrowserGuard.isLoopbackStyleHost(bad), "\(bad)")
        }
    }
}
