//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Testing
import TokengateConfig
import TokengateDemo
import TokengateHTTP
import TokengateTLS

@testable import TokengateGateway

/// The `tls:` keys of listeners and upstreams, as a client meets them: a real gateway on loopback, the real
/// `openssl s_client` and `curl` in front, and a real TLS backend behind.
@Suite(.serialized)
struct GatewayTLSOptionTests {
    /// Runs `body` against a gateway whose TLS listener has `tls`; `prepare` writes files into the gateway's
    /// directory first.
    func withGateway(
        tls: String = "{ certificates: [ { cert: cert.pem, key: key.pem } ] }",
        upstreams: String? = nil,
        prepare: (GatewayHarness) throws -> Void = { _ in },
        _ body: (GatewayHarness) async throws -> Void
    ) async throws {
        let harness = GatewayHarness()
        do {
            try FileManager.default.createDirectory(atPath: harness.directory, withIntermediateDirectories: true)
            try prepare(harness)
            try await harness.start(upstreams: upstreams, tls: tls)
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()

    }

    /// Writes a fresh self-signed certificate for `hostnames` as `name.crt` and `name.key` in `directory`.
    static func writeCertificate(_ name: String, hostnames: [String], in directory: String) throws {
        let certificate = try SelfSignedCertificate.generate(hostnames: hostnames)
        try certificate.certificatePEM.write(toFile: "\(directory)/\(name).crt", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: "\(directory)/\(name).key", atomically: true, encoding: .utf8)
    }

    /// The subjectAltName line of the certificate the listener on `port` serves for `serverName` (no SNI when
    /// `nil`), as `openssl x509 -ext subjectAltName` prints it: `DNS:a, DNS:b`.
    static func servedNames(port: Int, serverName: String?) throws -> String {
        let sni = serverName.map { "-servername \($0)" } ?? "-noservername"
        let output = try OpenSSLClient.sh(
            "timeout 10 openssl s_client -connect 127.0.0.1:\(port) \(sni) </dev/null 2>/dev/null"
                + " | openssl x509 -noout -ext subjectAltName"
        )
        return output.split(separator: "\n").dropFirst().joined().trimmingCharacters(in: .whitespaces)
    }

    // MARK: listen[].tls.min_version

    @Test func minVersionOneThreeRefusesATLSOneTwoHandshake() async throws {
        try await self.withGateway(tls: "{ certificates: [ { cert: cert.pem, key: key.pem } ], min_version: \"1.3\" }") {
            gateway in
            for (flag, ok) in [("-tls1_2", false), ("-tls1_3", true)] {
                let (code, stdout, _) = try Curl.process(
                    "/usr/bin/openssl",
                    ["s_client", "-connect", "127.0.0.1:\(gateway.tlsPort)", flag, "-servername", "localhost"],
                    input: Data("Q\n".utf8)
                )
                if ok {
                    #expect(code == 0, "\(flag) failed: \(stdout)")
                    #expect(stdout.contains("TLSv1.3"), "\(flag): \(stdout)")
                } else {
                    #expect(code != 0, "\(flag) was accepted: \(stdout)")
                    #expect(stdout.contains("Cipher is (NONE)"), "\(flag) negotiated a cipher: \(stdout)")
                }
            }
            let curl = try Curl.run(["--tlsv1.2", "--tls-max", "1.2", "\(gateway.baseURL)/"], caFile: gateway.certificatePath)
            #expect(curl.status == 0 && curl.exitCode != 0, "curl over TLS 1.2 got an answer: \(curl.status)")
            let modern = try Curl.run(["\(gateway.baseURL)/"], caFile: gateway.certificatePath)
            #expect(modern.status == 200, "\(modern.stderr)")
        }
    }

    // MARK: listen[].tls.certificates[].server_names

    /// `cert.pem` (localhost) is the default; `named` answers only for its configured names (exact and one
    /// label under a wildcard), not the one inside it; `own` has no `server_names` and answers for its own.
    @Test func configuredServerNamesSelectTheCertificateAndUnknownNamesGetTheFirst() async throws {
        let tls = """
            { certificates: [ { cert: cert.pem, key: key.pem }, \
            { cert: named.crt, key: named.key, server_names: [ api.example.com, "*.apps.example.com" ] }, \
            { cert: own.crt, key: own.key } ] }
            """
        let prepare: (GatewayHarness) throws -> Void = { gateway in
            try Self.writeCertificate("named", hostnames: ["inside.named.test"], in: gateway.directory)
            try Self.writeCertificate("own", hostnames: ["own.test"], in: gateway.directory)
        }
        try await self.withGateway(tls: tls, prepare: prepare) { gateway in
            let defaultNames = "DNS:localhost, IP Address:127.0.0.1"
            let cases: [(String?, String)] = [
                ("api.example.com", "DNS:inside.named.test"),
                ("API.Example.COM.", "DNS:inside.named.test"),
                ("x.apps.example.com", "DNS:inside.named.test"),
                ("own.test", "DNS:own.test"),
                // A configured list replaces the certificate's own names.
                ("inside.named.test", defaultNames),
                // A wildcard covers exactly one label.
                ("apps.example.com", defaultNames),
                ("a.b.apps.example.com", defaultNames),
                ("unknown.example", defaultNames),
                (nil, defaultNames),
            ]
            for (serverName, expected) in cases {
                let served = try Self.servedNames(port: gateway.tlsPort, serverName: serverName)
                #expect(served == expected, "SNI \(serverName ?? "(none)")")
            }
            // A real client that sends the configured name completes the handshake and gets its answer.
            let curl = try Curl.run(
                ["-k", "--resolve", "api.example.com:\(gateway.tlsPort):127.0.0.1", "https://api.example.com:\(gateway.tlsPort)/"],
                caFile: nil
            )
            #expect(curl.status == 200, "\(curl.stderr)")
        }
    }

    // MARK: upstreams.*.tls.server_name

    /// A TLS backend on 127.0.0.1 whose default certificate names `wrong.internal` and whose certificate for
    /// SNI `backend.internal` names only that: the gateway reaches it only by sending and verifying the
    /// configured name.
    @Test func theUpstreamServerNameIsSentAsSNIAndVerified() async throws {
        let directory = NSTemporaryDirectory() + "tokengate-tls-backend-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.writeCertificate("wrong", hostnames: ["wrong.internal"], in: directory)
        try Self.writeCertificate("backend", hostnames: ["backend.internal"], in: directory)
        let bundle = try String(contentsOfFile: directory + "/wrong.crt", encoding: .utf8)
            + String(contentsOfFile: directory + "/backend.crt", encoding: .utf8)
        try bundle.write(toFile: directory + "/ca.pem", atomically: true, encoding: .utf8)
        let context = try TLSServerContext(
            certificates: [
                TLSCertificateSource(certificatePath: directory + "/wrong.crt", privateKeyPath: directory + "/wrong.key"),
                TLSCertificateSource(certificatePath: directory + "/backend.crt", privateKeyPath: directory + "/backend.key"),
            ],
            alpnProtocols: ["http/1.1"]
        )
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let counter = RequestCounter()
        let backend = try await TLSDemoBackend.start(context: context, counter: counter, group: group)
        do {
            try await self.reachTheTLSBackend(port: backend.localAddress!.port!, caFile: directory + "/ca.pem", counter: counter)
        } catch {
            try? await backend.close()
            try? await group.shutdownGracefully()
            throw error
        }
        try await backend.close()
        try await group.shutdownGracefully()
    }

    /// With `server_name` the gateway gets the backend's answer; without it, the documented 502.
    private func reachTheTLSBackend(port: Int, caFile: String, counter: RequestCounter) async throws {
        for (serverName, expected) in [("backend.internal", 200), (nil, 502)] {
            let tls = "{ ca_file: \(caFile)" + (serverName.map { ", server_name: \($0)" } ?? "") + " }"
            let upstreams = "  api: { targets: [ \"https://127.0.0.1:\(port)\" ], connect_timeout: 1s, response_timeout: 2s, tls: \(tls) }"
            let before = counter.value
            try await self.withGateway(upstreams: upstreams) { gateway in
                let result = try Curl.run(["\(gateway.baseURL)/tls-upstream"], caFile: gateway.certificatePath)
                #expect(result.status == expected, "server_name \(serverName ?? "(none)"): \(result.body)")
                if expected == 200 {
                    #expect(result.body.contains("tls-upstream"), "\(result.body)")
                } else {
                    let answer = try #require(
                        try JSONSerialization.jsonObject(with: Data(result.body.utf8)) as? [String: String]
                    )
                    #expect(answer["error"] == "bad_gateway", "\(answer)")
                }
            }
            #expect(counter.value - before == (expected == 200 ? 1 : 0), "the request reached the backend: \(serverName ?? "(none)")")
        }
    }

    // MARK: Certificates reload without a restart

    /// The certificate files are replaced and the configuration reloaded: a new connection gets the new
    /// certificate, and a connection opened before keeps its session (and its certificate) and is still answered.
    @Test func aReloadServesTheNewCertificateToNewConnectionsAndKeepsOldOnes() async throws {
        try await self.withGateway { gateway in
            #expect(try Self.servedNames(port: gateway.tlsPort, serverName: "localhost") == "DNS:localhost, IP Address:127.0.0.1")
            let oldCertificate = try String(contentsOfFile: gateway.certificatePath, encoding: .utf8)
            try oldCertificate.write(toFile: gateway.directory + "/old.pem", atomically: true, encoding: .utf8)
            let ready = gateway.directory + "/first-answered"
            let go = gateway.directory + "/reloaded"
            // One keep-alive TLS connection: a request, a pause until the test has reloaded, a second request.
            let script = """
                import os, socket, ssl, time
                context = ssl.create_default_context(cafile='\(gateway.directory)/old.pem')
                raw = socket.create_connection(('127.0.0.1', \(gateway.tlsPort)), timeout=20)
                s = context.wrap_socket(raw, server_hostname='localhost')
                def ask(path):
                    s.sendall(b'GET ' + path + b' HTTP/1.1\\r\\nHost: localhost\\r\\n\\r\\n')
                    data = b''
                    while b'\\r\\n\\r\\n' not in data:
                        chunk = s.recv(4096)
                        if not chunk:
                            return 'closed'
                        data += chunk
                    head, _, body = data.partition(b'\\r\\n\\r\\n')
                    lines = head.split(b'\\r\\n')
                    length = [int(l.split(b':')[1]) for l in lines if l.lower().startswith(b'content-length:')][0]
                    while len(body) < length:
                        body += s.recv(4096)
                    return lines[0].decode().replace(' ', '_')
                print(ask(b'/before'), flush=True)
                open('\(ready)', 'w').close()
                deadline = time.time() + 20
                while not os.path.exists('\(go)') and time.time() < deadline:
                    time.sleep(0.05)
                print(ask(b'/still'))
                print('same-certificate' if ssl.DER_cert_to_PEM_cert(s.getpeercert(True)).strip() == open('\(gateway.directory)/old.pem').read().strip() else 'other-certificate')
                """
            let client = Task.detached { try Curl.process("/usr/bin/python3", ["-c", script]) }
            for _ in 0..<200 where !FileManager.default.fileExists(atPath: ready) {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(FileManager.default.fileExists(atPath: ready), "the first request on the old connection was not answered")

            // Renewal as a certificate manager does it: new files over the old paths, then a reload.
            let renewed = try SelfSignedCertificate.generate(hostnames: ["renewed.test", "localhost"])
            try renewed.certificatePEM.write(toFile: gateway.directory + "/cert.pem", atomically: true, encoding: .utf8)
            try renewed.privateKeyPEM.write(toFile: gateway.directory + "/key.pem", atomically: true, encoding: .utf8)
            try gateway.server.reload(configuration: GatewayConfiguration.load(path: gateway.directory + "/tokengate.yaml"))

            #expect(try Self.servedNames(port: gateway.tlsPort, serverName: "localhost") == "DNS:renewed.test, DNS:localhost")
            let fresh = try Curl.run(["\(gateway.baseURL)/after"], caFile: gateway.certificatePath)
            #expect(fresh.status == 200, "a client trusting only the new certificate: \(fresh.stderr)")

            _ = FileManager.default.createFile(atPath: go, contents: nil)
            let (_, output, errors) = try await client.value
            #expect(
                output.split(separator: "\n") == ["HTTP/1.1_200_OK", "HTTP/1.1_200_OK", "same-certificate"],
                "the connection from before the reload: \(output) \(errors)"
            )
        }
    }
}

/// The demo backend behind TLS (the product's demo backend is plain HTTP).
enum TLSDemoBackend {
    static func start(context: TLSServerContext, counter: RequestCounter, group: any EventLoopGroup) async throws -> any Channel {
        var logger = Logger(label: "tls-demo-backend")
        logger.logLevel = .critical
        let tlsLogger = logger
        return try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(TLSHandler(context: context, logger: tlsLogger))
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(DemoBackendHandler(counter: counter))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }
}
