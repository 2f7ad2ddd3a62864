//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS

@testable import TokengateGateway

/// `421 Misdirected Request` for a request whose host the connection's certificate does not cover, as real
/// clients meet it: curl over HTTP/1.1 and HTTP/2 sending SNI for one name and `Host` for another, nghttp
/// and Python's h2 with another `:authority` per stream, `openssl s_client` with raw requests.
///
/// The listener has three certificates: the harness's default `cert.pem` (localhost, 127.0.0.1), `a.crt`
/// (a.test) and `b.crt` (b.test and *.apps.test).
@Suite(.serialized)
struct GatewayMisdirectedRequestTests {
    static let threeCertificates =
        "{ certificates: [ { cert: cert.pem, key: key.pem }, { cert: a.crt, key: a.key }, { cert: b.crt, key: b.key } ]"

    func withGateway(tls: String = Self.threeCertificates + " }", _ body: (GatewayHarness) async throws -> Void) async throws {
        let harness = GatewayHarness()
        do {
            try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
            try GatewayTLSOptionTests.writeCertificate("a", hostnames: ["a.test"], in: harness.directory)
            try GatewayTLSOptionTests.writeCertificate("b", hostnames: ["b.test", "*.apps.test"], in: harness.directory)
            try await harness.start(tls: tls)
            // One bundle of the three, so clients verify whichever certificate SNI chose.
            let bundle = try ["cert.pem", "a.crt", "b.crt"].map {
                try String(contentsOfFile: harness.directory + "/" + $0, encoding: .utf8)
            }.joined()
            try bundle.write(toFile: harness.directory + "/bundle.pem", atomically: true, encoding: .utf8)
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    /// curl connecting to 127.0.0.1 with SNI (and certificate verification) for `serverName`, sending `host`
    /// as `Host` (HTTP/2: `:authority`).
    func curl(_ gateway: GatewayHarness, _ flag: String, serverName: String, host: String, path: String = "/") throws -> Curl.Result {
        let port = gateway.tlsPort
        return try Curl.run(
            [flag, "--connect-to", "\(serverName):\(port):127.0.0.1:\(port)", "-H", "Host: \(host)", "https://\(serverName):\(port)\(path)"],
            caFile: gateway.directory + "/bundle.pem"
        )
    }

    /// The gateway's JSON answer's `error`.
    func error(of body: String) -> String? {
        (try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: String])?["error"]
    }

    /// `send` written raw over one TLS connection made by `openssl s_client` (no SNI when `serverName` is `nil`);
    /// what came back.
    static func rawExchange(port: Int, serverName: String?, send: String) throws -> String {
        let sni = serverName.map { ["-servername", $0] } ?? ["-noservername"]
        let (_, stdout, _) = try Curl.process(
            "/usr/bin/timeout",
            ["10", "/usr/bin/openssl", "s_client", "-connect", "127.0.0.1:\(port)", "-quiet", "-ign_eof"] + sni,
            input: Data(send.utf8)
        )
        return stdout
    }

    /// The status lines of `output`, in order.
    static func statusLines(_ output: String) -> [String] {
        // A status line may follow the previous response's body with no line break between them.
        output.components(separatedBy: "HTTP/1.").dropFirst().map { "HTTP/1." + ($0.components(separatedBy: "\r\n").first ?? "") }
    }

    // MARK: curl, HTTP/1.1 and HTTP/2

    @Test func curlSendingSNIForOneNameAndHostForAnotherGets421OverBothProtocols() async throws {
        try await self.withGateway { gateway in
            var refused = 0
            for flag in ["--http1.1", "--http2"] {
                // Hosts the connection's certificate covers: its own name in any case, with a port, a trailing
                // dot, and (b's) a name under its wildcard, which a client may coalesce onto it.
                for (serverName, host) in [
                    ("a.test", "a.test"), ("a.test", "A.TEST:\(gateway.tlsPort)"), ("a.test", "a.test."),
                    ("b.test", "b.test"), ("b.test", "x.apps.test"), ("x.apps.test", "b.test"),
                    ("localhost", "localhost"), ("localhost", "127.0.0.1"),
                ] {
                    let result = try self.curl(gateway, flag, serverName: serverName, host: host)
                    #expect(result.status == 200, "\(flag) SNI \(serverName) Host \(host): \(result.status) \(result.body) \(result.stderr)")
                }
                // Hosts it does not: another certificate's, two labels under a wildcard, an unknown one.
                for (serverName, host) in [
                    ("a.test", "b.test"), ("a.test", "x.apps.test"), ("b.test", "a.test:\(gateway.tlsPort)"),
                    ("b.test", "x.y.apps.test"), ("localhost", "a.test"), ("a.test", "unknown.test"),
                ] {
                    let result = try self.curl(gateway, flag, serverName: serverName, host: host)
                    #expect(result.status == 421, "\(flag) SNI \(serverName) Host \(host): \(result.status) \(result.stderr)")
                    #expect(self.error(of: result.body) == "misdirected_request", "\(result.body)")
                    #expect(result.header("content-type") == "application/json")
                    #expect(result.header("connection") == nil, "a 421 keeps the connection: \(result.headers)")
                    refused += 1
                }
                // Before the token is looked at: an API route without a token is 421, not 401.
                let api = try self.curl(gateway, flag, serverName: "a.test", host: "b.test", path: "/api/items")
                #expect(api.status == 421, "\(flag): \(api.status)")
                #expect(api.header("www-authenticate") == nil)
                refused += 1
                let allowedAPI = try self.curl(gateway, flag, serverName: "a.test", host: "a.test", path: "/api/items")
                #expect(allowedAPI.status == 401, "\(flag): \(allowedAPI.status)")
            }
            // Counted and logged like the gateway's other answers before a route.
            let metrics = gateway.server.metrics.render()
            #expect(metrics.contains("tokengate_unrouted_answers_total{reason=\"misdirected_request\"} \(refused)"), "\(metrics)")
            let lines = gateway.logLines.all.filter { $0.contains("reason=misdirected_request") }
            #expect(lines.count == refused, "\(lines)")
            #expect(lines.allSatisfy { $0.contains("status=421") && $0.contains("route=-") }, "\(lines)")
        }
    }

    // MARK: HTTP/2 streams

    /// The `:status` nghttp printed for `uri`, sent with `authority` as `:authority` when given.
    static func nghttpStatus(uri: String, authority: String?) throws -> (String, String)? {
        let headers = authority.map { ["-H", ":authority: \($0)"] } ?? []
        let (_, output, errors) = try Curl.process("/usr/bin/timeout", ["10", "/usr/bin/nghttp", "-v"] + headers + [uri])
        let line = output.split(separator: "\n").first { $0.contains(":status:") }
        #expect(line != nil, "\(uri) \(authority ?? "-"): \(output) \(errors)")
        return line.map { (String($0.split(separator: " ").last ?? ""), output) }
    }

    /// nghttp sends the `:authority` it is given as its SNI too (an address as none), so it is sent the
    /// certificate for that name: answered where a certificate covers the name, and `421` where none does and
    /// the default certificate, which does not either, answered the handshake.
    @Test func nghttpWithAnAuthorityNoCertificateCoversGets421() async throws {
        try await self.withGateway { gateway in
            let port = gateway.tlsPort
            let cases: [(String, String?, String)] = [
                ("https://localhost:\(port)/", nil, "200"),
                ("https://localhost:\(port)/", "a.test", "200"),
                // Routed: the token check answers.
                ("https://localhost:\(port)/api/items", "b.test:\(port)", "401"),
                ("https://localhost:\(port)/", "x.apps.test", "200"),
                // No certificate's name: the default certificate (localhost) answered, and does not cover it.
                ("https://localhost:\(port)/", "unknown.test", "421"),
                ("https://localhost:\(port)/api/items", "x.y.apps.test", "421"),
                // No SNI (an address), and an address is not compared.
                ("https://127.0.0.1:\(port)/", nil, "200"),
            ]
            for (uri, authority, expected) in cases {
                let status = try Self.nghttpStatus(uri: uri, authority: authority)
                #expect(status?.0 == expected, "\(uri) :authority \(authority ?? "-"): \(status?.1 ?? "")")
            }
        }
    }

    /// One HTTP/2 connection (Python's h2 over `ssl`, SNI a.test) carrying streams for several hosts: each
    /// stream's `:authority` is compared, so the connection reaches only the names its certificate covers,
    /// and a 421 resets nothing: the streams after it are answered on the same connection.
    @Test func eachStreamOfACoalescedConnectionIsCheckedOnItsOwn() async throws {
        try await self.withGateway { gateway in
            let script = """
                import socket, ssl, sys
                import h2.connection, h2.config, h2.events
                context = ssl.create_default_context(cafile=sys.argv[2])
                context.set_alpn_protocols(['h2'])
                raw = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)
                s = context.wrap_socket(raw, server_hostname='a.test')
                assert s.selected_alpn_protocol() == 'h2'
                c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
                c.initiate_connection()
                authorities = ['a.test', 'b.test', 'A.test:' + sys.argv[1], 'x.apps.test', 'localhost', 'a.test']
                for index, authority in enumerate(authorities):
                    c.send_headers(1 + 2 * index, [(':method', 'GET'), (':scheme', 'https'), (':authority', authority),
                                                   (':path', '/stream')], end_stream=True)
                s.sendall(c.data_to_send())
                statuses, ended = {}, set()
                while len(ended) < len(authorities):
                    data = s.recv(65536)
                    if not data:
                        break
                    for event in c.receive_data(data):
                        if isinstance(event, h2.events.ResponseReceived):
                            statuses[event.stream_id] = dict(event.headers)[b':status'].decode()
                        elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                            ended.add(event.stream_id)
                        elif isinstance(event, h2.events.ConnectionTerminated):
                            ended = set(range(1, 2 * len(authorities), 2))
                    s.sendall(c.data_to_send())
                print(' '.join(statuses.get(1 + 2 * i, '-') for i in range(len(authorities))))
                """
            // `python3` from PATH: the one scripts/install-deps.sh gave the h2 package.
            let (code, output, errors) = try Curl.process(
                "/usr/bin/env", ["python3", "-c", script, String(gateway.tlsPort), gateway.directory + "/bundle.pem"])
            #expect(code == 0, "\(errors)")
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "200 421 200 421 421 200", "\(output) \(errors)")
        }
    }

    // MARK: openssl s_client, raw HTTP/1.1

    /// `openssl s_client -servername a.test` with requests for other hosts on one keep-alive connection: the
    /// 421 does not close it, and the request after it is served.
    @Test func aRawRequestForAnotherHostGets421AndTheConnectionGoesOn() async throws {
        try await self.withGateway { gateway in
            let output = try Self.rawExchange(
                port: gateway.tlsPort,
                serverName: "a.test",
                send: "GET /one HTTP/1.1\r\nHost: b.test\r\n\r\n"
                    + "GET /two HTTP/1.1\r\nHost: x.apps.test\r\n\r\n"
                    + "GET /three HTTP/1.1\r\nHost: a.test\r\n\r\n"
                    + "GET /four HTTP/1.1\r\nHost: A.Test:443\r\nConnection: close\r\n\r\n"
            )
            #expect(
                Self.statusLines(output) == [
                    "HTTP/1.1 421 Misdirected Request", "HTTP/1.1 421 Misdirected Request", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK",
                ],
                "\(output)"
            )
            #expect(output.contains("\"error\":\"misdirected_request\""), "\(output)")
            #expect(!output.lowercased().contains("connection: close\r\n\r\n{\"error\":\"misdirected"), "\(output)")

            // The connection's usual rule for any answer given before the request's body was read: it closes.
            let withBody = try Self.rawExchange(
                port: gateway.tlsPort,
                serverName: "a.test",
                send: "POST /five HTTP/1.1\r\nHost: b.test\r\nContent-Length: 5\r\n\r\nhello"
                    + "GET /six HTTP/1.1\r\nHost: a.test\r\n\r\n"
            )
            #expect(Self.statusLines(withBody) == ["HTTP/1.1 421 Misdirected Request"], "\(withBody)")
        }
    }

    /// A client that sends no SNI gets the default certificate, and its requests are compared with that
    /// certificate's names; an address or a request without a host is not compared.
    @Test func withoutSNITheDefaultCertificatesNamesApply() async throws {
        try await self.withGateway { gateway in
            let output = try Self.rawExchange(
                port: gateway.tlsPort,
                serverName: nil,
                send: "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"
                    + "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
                    + "GET / HTTP/1.1\r\nHost: 127.0.0.1:\(gateway.tlsPort)\r\n\r\n"
                    + "GET / HTTP/1.1\r\nHost: [::1]\r\n\r\n"
                    + "GET / HTTP/1.0\r\n\r\n"
            )
            #expect(
                Self.statusLines(output) == [
                    "HTTP/1.1 200 OK", "HTTP/1.1 421 Misdirected Request", "HTTP/1.1 200 OK", "HTTP/1.1 200 OK", "HTTP/1.0 200 OK",
                ],
                "\(output)"
            )
        }
    }

    // MARK: When nothing is compared

    /// `misdirected_requests: allow` routes every request by its host, as before the check existed.
    @Test func allowServesRequestsForHostsOutsideTheCertificate() async throws {
        try await self.withGateway(tls: Self.threeCertificates + ", misdirected_requests: allow }") { gateway in
            for flag in ["--http1.1", "--http2"] {
                let result = try self.curl(gateway, flag, serverName: "a.test", host: "b.test")
                #expect(result.status == 200, "\(flag): \(result.status) \(result.body)")
            }
            let output = try Self.rawExchange(
                port: gateway.tlsPort, serverName: "a.test", send: "GET / HTTP/1.1\r\nHost: b.test\r\nConnection: close\r\n\r\n")
            #expect(Self.statusLines(output) == ["HTTP/1.1 200 OK"], "\(output)")
        }
    }

    /// With one certificate every client gets it whatever its SNI: there is no other certificate a `421` could
    /// send the client to, so nothing is compared.
    @Test func aSingleCertificateListenerServesEveryHost() async throws {
        try await self.withGateway(tls: "{ certificates: [ { cert: cert.pem, key: key.pem } ] }") { gateway in
            for flag in ["--http1.1", "--http2"] {
                let result = try Curl.run(
                    [flag, "-k", "--connect-to", "a.test:\(gateway.tlsPort):127.0.0.1:\(gateway.tlsPort)", "-H", "Host: b.test",
                     "https://a.test:\(gateway.tlsPort)/"],
                    caFile: nil
                )
                #expect(result.status == 200, "\(flag): \(result.status) \(result.body)")
            }
        }
    }
}
