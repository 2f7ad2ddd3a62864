//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTLS
import TokengateTestSupport
import TokengateTokens
import TokengateVersion

/// The `tokengate serve` binary itself, started the way an operator starts it: what it does when its
/// cutoff store is unreachable at start.
@Suite(.serialized)
struct ServeCommandTests {
    static let binary = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/debug/tokengate").path

    private struct Setup {
        let directory: String
        let signer: TokenSigner
        let port: Int
        let adminPort: Int
    }

    /// A configuration whose PostgreSQL store is unreachable (nothing listens on the port), with a snapshot
    /// cache file next to it.
    private func setUp() throws -> Setup {
        let directory = NSTemporaryDirectory() + "tokengate-serve-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
        try certificate.certificatePEM.write(toFile: directory + "/cert.pem", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: directory + "/key.pem", atomically: true, encoding: .utf8)
        let keys = try KeyGenerator.generate(algorithm: .edDSA, keyID: "test-only")
        try keys.publicJWKS.write(toFile: directory + "/public.jwks", atomically: true, encoding: .utf8)
        let port = try GatewayIntegrationTests.unusedPort()
        let adminPort = try GatewayIntegrationTests.unusedPort()
        let closedPort = try GatewayIntegrationTests.unusedPort()
        let yaml = """
            listen:
              - address: 127.0.0.1:\(port)
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            admin: { address: 127.0.0.1:\(adminPort) }
            keys: [ { jwks: public.jwks } ]
            cutoffs:
              postgres: "postgres://tokengate@127.0.0.1:\(closedPort)/tokengate?sslmode=disable"
              stale_after: 60s
              cache_file: cutoffs.cache
            upstreams:
              api: { targets: [ "http://127.0.0.1:9" ] }
            routes:
              - { path_prefix: /, upstream: api, accept: [api] }
            """
        try yaml.write(toFile: directory + "/tokengate.yaml", atomically: true, encoding: .utf8)
        return Setup(directory: directory, signer: try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8)), port: port, adminPort: adminPort)
    }

    /// Switches the setup's configuration to a JSON-file store (no database, no cache) and starts `serve` with it,
    /// its output to `output` (or nowhere), run through `launcher` (such as `prlimit`) when given.
    private func serveWithJSONFileStore(_ setup: Setup, output: String? = nil, launcher: [String] = []) throws -> Process {
        let path = setup.directory + "/tokengate.yaml"
        var yaml = try String(contentsOfFile: path, encoding: .utf8)
        let start = yaml.range(of: "cutoffs:")!.lowerBound
        let end = yaml.range(of: "upstreams:")!.lowerBound
        yaml.replaceSubrange(start..<end, with: "cutoffs: { file: cutoffs.json }\n")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        try "{}".write(toFile: setup.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
        let process = Process()
        let command = launcher + [Self.binary, "serve", "--config", path]
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        if let output {
            _ = FileManager.default.createFile(atPath: output, contents: nil)
        }
        let handle = FileHandle(forWritingAtPath: output ?? "/dev/null")
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// Waits (up to 10 s) until the TLS listener answers a request without a token with 401.
    private func waitUntilServing(_ setup: Setup) async throws -> Bool {
        for _ in 0..<100 {
            if (try? Curl.run(["--max-time", "1", "https://localhost:\(setup.port)/"], caFile: setup.directory + "/cert.pem").status) == 401 {
                return true
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// The lines of the gateway's output file `output` that contain every one of `parts`.
    private func outputLines(_ output: String, containing parts: String...) -> [Substring] {
        ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").filter { line in
            parts.allSatisfy { line.contains($0) }
        }
    }

    /// Waits (up to 5 s) for a line of `output` that contains every one of `parts`, and returns the first.
    private func awaitOutputLine(_ output: String, containing parts: String...) async throws -> Substring? {
        for _ in 0..<100 {
            let lines = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n")
            if let line = lines.first(where: { line in parts.allSatisfy { line.contains($0) } }) { return line }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// A SIGHUP right after the listeners came up (`systemctl reload` after start, a config manager's handler)
    /// must not end the process: its default action did until the reload service trapped it.
    @Test func aSIGHUPRightAfterListeningDoesNotStopTheGateway() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let output = setup.directory + "/output"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        var listening = false
        for _ in 0..<2000 where !listening {
            listening = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("\"msg\":\"listening\"")
            if !listening { try await Task.sleep(for: .milliseconds(2)) }
        }
        try #require(listening)
        kill(process.processIdentifier, SIGHUP)
        #expect(try await self.waitUntilServing(setup), "the gateway stopped serving after SIGHUP")
        #expect(process.isRunning, "SIGHUP ended the process: \(process.terminationReason.rawValue) \(process.terminationStatus)")
    }

    /// Standard output that nobody reads (journald or a log driver backing up) must not stop the gateway: the
    /// access-log lines of 600 requests (well over a pipe's 64 KiB) are queued or dropped, and requests and
    /// `/healthz` are answered throughout.
    @Test func aStalledStandardOutputDoesNotStopTheGateway() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let fifo = setup.directory + "/stdout.fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        // Held open for reading and never read: the gateway's writes fill the pipe and then block.
        let held = open(fifo, O_RDWR)
        try #require(held >= 0)
        defer { close(held) }
        let process = try self.serveWithJSONFileStore(setup, output: fifo)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let url = "https://localhost:\(setup.port)/x"
        var statuses: [Substring] = []
        for _ in 0..<6 {
            let (_, stdout, _) = try Curl.process(
                "/usr/bin/curl",
                ["-s", "--max-time", "10", "--cacert", setup.directory + "/cert.pem", "-w", "%{http_code}\n"]
                    + Array(repeating: ["-o", "/dev/null", url], count: 100).flatMap { $0 }
            )
            statuses += stdout.split(separator: "\n")
        }
        #expect(statuses.count == 600 && statuses.allSatisfy { $0 == "401" }, "\(Dictionary(grouping: statuses, by: { $0 }).mapValues(\.count))")
        let health = try Curl.run(["--max-time", "2", "http://127.0.0.1:\(setup.adminPort)/healthz"], caFile: nil)
        #expect(health.status == 200)
    }

    /// Out of file descriptors, the listener pauses accepting and says so, instead of retrying `accept` in a
    /// loop (a core at 100 %, nothing logged); once the connections holding the descriptors go, it serves.
    @Test func runningOutOfFileDescriptorsPausesAcceptAndIsLogged() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit"))
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let output = setup.directory + "/output"
        let process = try self.serveWithJSONFileStore(setup, output: output, launcher: ["/usr/bin/prlimit", "--nofile=64:64"])
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        func cpuTicks() throws -> Int {
            let stat = try String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)
            let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
            return Int(fields[11])! + Int(fields[12])!  // utime and stime (fields 14 and 15 of stat(5))
        }
        // 90 silent connections, held for 4 s: more than the 64 descriptors allow.
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        holder.arguments = [
            "-c",
            "import socket, time\nheld = [socket.create_connection(('127.0.0.1', \(setup.port))) for _ in range(90)]\ntime.sleep(4)",
        ]
        try holder.run()
        try await Task.sleep(for: .seconds(1))
        let before = try cpuTicks()
        try await Task.sleep(for: .seconds(2))
        let spent = try cpuTicks() - before
        #expect(spent < 40, "\(spent) ticks of CPU in 2 s with the descriptors gone (a spinning accept loop takes ~200)")
        holder.waitUntilExit()
        #expect(try await self.waitUntilServing(setup), "the gateway must serve again once the descriptors are free")
        let log = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(log.contains("cannot accept connections (out of file descriptors"), "\(log.suffix(2000))")
        #expect(log.contains("the open-file limit is 64, and limits.max_connections 10000 needs about 20064"), "\(log.prefix(3000))")
    }

    /// A soft open-file limit under the hard one is raised to it at start, and said so.
    @Test func theOpenFileLimitIsRaisedToTheHardLimit() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let output = setup.directory + "/output"
        // The hard limit stays this process's own (raising it needs privileges a test may not have).
        var own = rlimit()
        try #require(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &own) == 0 && own.rlim_max > 256)
        let hard = own.rlim_max == rlim_t.max ? "unlimited" : String(own.rlim_max)
        let process = try self.serveWithJSONFileStore(setup, output: output, launcher: ["/usr/bin/prlimit", "--nofile=256:\(hard)"])
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let limits = try String(contentsOfFile: "/proc/\(process.processIdentifier)/limits", encoding: .utf8)
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        #expect(line?.suffix(3).first.map(String.init) == hard, "\(limits)")
        let log = (try? String(contentsOfFile: output, encoding: .utf8)) ?? ""
        #expect(log.contains("raised the open-file limit from 256 to "), "\(log.prefix(2000))")
        // 10,000 connections (the default limit) need about 20,064 descriptors.
        #expect(log.contains("the open-file limit is") == (own.rlim_max < 20_064), "\(log.prefix(2000))")
    }

    /// The plain case an operator starts with: a JSON-file store, no cache. The process must stay up,
    /// serve, and exit 0 on SIGTERM.
    @Test func servesUntilSIGTERMAndExitsZero() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let process = try self.serveWithJSONFileStore(setup)
        var ready = false
        for _ in 0..<100 where !ready {
            try await Task.sleep(for: .milliseconds(100))
            ready = (try? Curl.run(["--max-time", "1", "https://localhost:\(setup.port)/"], caFile: setup.directory + "/cert.pem").status) == 401
        }
        #expect(ready, "serve did not come up")
        try await Task.sleep(for: .seconds(2))
        #expect(process.isRunning, "serve stopped by itself")
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0, "SIGTERM must end in exit 0")
    }

    /// The access log as an operator's log pipeline reads it: on standard output, one JSON object a request
    /// with the members operations.md lists, every value a string, no query and no token.
    @Test func accessLogLinesAreJSONObjectsWithoutQueryOrToken() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let output = setup.directory + "/output"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let token = try setup.signer.mint(
            TokenClaims(
                subject: "user-ü-42", issuedAt: Int64(Date().timeIntervalSince1970) - 5, apiOnly: true,
                expiresAt: nil, notBefore: nil, issuer: nil, audience: nil
            )
        )
        // The upstream's port is closed: the request is verified, forwarded and answered 502.
        let result = try Curl.run(
            ["--max-time", "5", "-H", "Authorization: Bearer \(token)", "-H", "X-Request-Id: access-line-1",
             "https://localhost:\(setup.port)/v1/items?q=secret-query"],
            caFile: setup.directory + "/cert.pem"
        )
        #expect(result.status == 502)
        let line = try await self.awaitOutputLine(output, containing: "\"msg\":\"request\"", "access-line-1")
        let text = try #require(line, "no access-log line for the request")
        #expect(!text.contains(token) && !text.contains("secret-query"), "\(text)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: String], "\(text)")
        #expect(
            Set(object.keys) == [
                "ts", "level", "label", "msg", "duration_us", "method", "path", "reason", "request_id", "route",
                "status", "token_kind", "upstream", "user", "client", "host", "protocol", "bytes_in", "bytes_out",
                "user_agent",
            ]
        )
        #expect(object["client"] == "127.0.0.1")
        #expect(object["path"] == "/v1/items")
        #expect(object["method"] == "GET")
        #expect(object["status"] == "502")
        #expect(object["reason"] == "upstream_connect_failed")
        #expect(object["user"] == "user-ü-42")
        #expect(object["token_kind"] == "api")
        #expect(object["upstream"] == "api")
        #expect(Int(object["duration_us"] ?? "") != nil)
        #expect(object["client"] == "127.0.0.1" && object["host"] == "localhost:\(setup.port)", "\(text)")
        #expect(object["bytes_in"] == "0" && object["protocol"] != nil && object["user_agent"]?.hasPrefix("curl/") == true)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let stamp = try #require(formatter.date(from: object["ts"] ?? ""), "\(text)")
        #expect(abs(stamp.timeIntervalSinceNow) < 30)
    }

    /// Under systemd (`Type=notify`): `READY=1` only once the gateway serves, `RELOADING=1` with the monotonic
    /// time and `READY=1` around a SIGHUP reload, `WATCHDOG=1` while it runs and `STOPPING=1` at SIGTERM, sent
    /// to a real unix datagram socket as systemd's would receive them — by path and in the abstract namespace.
    @Test(arguments: [false, true])
    func systemdIsToldReadyReloadingWatchdogAndStopping(abstract: Bool) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let name = "tokengate-notify-" + UUID().uuidString.prefix(8)
        let socket = try NotifySocket(address: abstract ? "@" + name : setup.directory + "/" + name)
        let output = setup.directory + "/output"
        // WATCHDOG_USEC of 0.2 s: a ping every 0.1 s, so one arrives before the reload below.
        let process = try self.serveWithJSONFileStore(
            setup, output: output,
            launcher: ["/usr/bin/env", "NOTIFY_SOCKET=\(socket.address)", "WATCHDOG_USEC=200000"]
        )
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        let ready = socket.receiveSkippingWatchdog()
        #expect(ready == "READY=1", "\(ready ?? "nothing") (\((try? String(contentsOfFile: output, encoding: .utf8)) ?? ""))")
        // READY=1 means serving: the first request after it is answered, without waiting for the listener.
        let first = try Curl.run(["--max-time", "5", "https://localhost:\(setup.port)/"], caFile: setup.directory + "/cert.pem")
        #expect(first.status == 401, "READY=1 before the listener served: \(first.status) \(first.stderr)")
        var watchdog: String?
        for _ in 0..<20 where watchdog != "WATCHDOG=1" { watchdog = socket.receive() }
        #expect(watchdog == "WATCHDOG=1")

        let beforeReload = NotifySocket.monotonicMicroseconds()
        kill(process.processIdentifier, SIGHUP)
        let reloading = try #require(socket.receiveSkippingWatchdog(), "no message after SIGHUP")
        let lines = reloading.split(separator: "\n")
        #expect(lines.first == "RELOADING=1", "\(reloading)")
        let stamp = lines.first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { Int64($0.dropFirst("MONOTONIC_USEC=".count)) }
        let monotonic = try #require(stamp, "RELOADING=1 without MONOTONIC_USEC: \(reloading)")
        #expect(monotonic >= beforeReload && monotonic <= NotifySocket.monotonicMicroseconds(), "not the monotonic clock's now")
        #expect(socket.receiveSkippingWatchdog() == "READY=1", "the reload's end")

        process.terminate()
        #expect(socket.receiveSkippingWatchdog() == "STOPPING=1")
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
    }

    /// A second SIGTERM during the drain ends it at once, closing what is still open: an operator pressing
    /// Ctrl-C twice, or a supervisor escalating, must not wait out `drain_timeout` behind a backend that never
    /// answers. Before, the second signal was ignored.
    @Test func aSecondSIGTERMEndsTheDrainAtOnce() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        // A backend that takes connections into its backlog and never answers.
        let silentPort = try GatewayIntegrationTests.unusedPort()
        let silent = try SocketProbe.listenSilently(port: silentPort)
        defer { close(silent) }
        let path = setup.directory + "/tokengate.yaml"
        let yaml = try String(contentsOfFile: path, encoding: .utf8)
            .replacingOccurrences(of: "http://127.0.0.1:9\"", with: "http://127.0.0.1:\(silentPort)\"")
        try (yaml + "\nlimits: { drain_timeout: 60s }\n").write(toFile: path, atomically: true, encoding: .utf8)
        let output = setup.directory + "/output"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            if process.isRunning { process.terminate() }
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let token = try setup.signer.mint(
            TokenClaims(
                subject: "drain-user", issuedAt: Int64(Date().timeIntervalSince1970) - 5, apiOnly: true,
                expiresAt: nil, notBefore: nil, issuer: nil, audience: nil
            )
        )
        let client = Process()
        client.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        client.arguments = [
            "-s", "-o", "/dev/null", "--max-time", "60", "--cacert", setup.directory + "/cert.pem",
            "-H", "Authorization: Bearer \(token)", "https://localhost:\(setup.port)/slow",
        ]
        client.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try client.run()
        defer {
            if client.isRunning { client.terminate() }
            client.waitUntilExit()
        }
        try await Task.sleep(for: .milliseconds(700))  // The request reaches the silent backend.
        kill(process.processIdentifier, SIGTERM)
        try #require(try await self.awaitOutputLine(output, containing: "\"msg\":\"draining\"") != nil, "no draining line after the first SIGTERM")
        try await Task.sleep(for: .milliseconds(500))
        try #require(process.isRunning, "the drain must hold while the request is in flight")
        let second = ContinuousClock.now
        kill(process.processIdentifier, SIGTERM)
        while process.isRunning, ContinuousClock.now - second < .seconds(10) {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(!process.isRunning, "the second SIGTERM did not end the drain")
        #expect(ContinuousClock.now - second < .seconds(5))
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        let text = try String(contentsOfFile: output, encoding: .utf8)
        #expect(text.contains("\"msg\":\"drain cut short by a second signal\""), "\(text)")
        #expect(text.contains("\"forced_connections\":\"1\""), "\(text)")
    }

    /// `log.level` applies on reload (SIGHUP): at `warning` a request writes no access line; after the level
    /// goes to `info` and the gateway reloads, the reload's own line and the next request's access line are
    /// written. Before, a reload that changed the level was refused and a restart was needed.
    @Test func theLogLevelChangesOnReload() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let path = setup.directory + "/tokengate.yaml"
        try (try String(contentsOfFile: path, encoding: .utf8) + "\nlog: { level: warning }\n")
            .write(toFile: path, atomically: true, encoding: .utf8)
        let output = setup.directory + "/output"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let quiet = try Curl.run(["-H", "X-Request-Id: before-reload", "https://localhost:\(setup.port)/a"], caFile: setup.directory + "/cert.pem")
        #expect(quiet.status == 401)
        try await Task.sleep(for: .milliseconds(200))
        #expect(self.outputLines(output, containing: "before-reload").isEmpty, "an info line was written at level warning")

        let yaml = try String(contentsOfFile: path, encoding: .utf8)
        try yaml.replacingOccurrences(of: "log: { level: warning }", with: "log: { level: info }")
            .write(toFile: path, atomically: true, encoding: .utf8)
        kill(process.processIdentifier, SIGHUP)
        let reloaded = try await self.awaitOutputLine(output, containing: "\"msg\":\"configuration reloaded\"")
        #expect(reloaded != nil, "\(self.outputLines(output, containing: "reload"))")
        let logged = try Curl.run(["-H", "X-Request-Id: after-reload", "https://localhost:\(setup.port)/a"], caFile: setup.directory + "/cert.pem")
        #expect(logged.status == 401)
        let access = try await self.awaitOutputLine(output, containing: "after-reload", "\"msg\":\"request\"")
        #expect(access != nil, "no access line after the level went to info")
    }

    /// A reload re-reads `admin.secret_file`: rotating a leaked secret takes SIGHUP, not a restart. Before, the
    /// reload said "reloaded" and the old secret kept working. A secret file that no longer reads (too short)
    /// refuses the reload, and the secret in force stays.
    @Test func aReloadRotatesTheAdminSecret() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let secretPath = setup.directory + "/admin.secret"
        func writeSecret(_ value: String) throws {
            try value.write(toFile: secretPath, atomically: true, encoding: .utf8)
            chmod(secretPath, 0o600)
        }
        try writeSecret("old-secret-0123456789abcdef-test-only\n")
        let path = setup.directory + "/tokengate.yaml"
        let yaml = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(
            of: "admin: { address: 127.0.0.1:\(setup.adminPort) }",
            with: "admin: { address: 127.0.0.1:\(setup.adminPort), secret_file: admin.secret }"
        )
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let output = setup.directory + "/output"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        func metrics(_ secret: String) throws -> Int {
            try Curl.run(["-H", "Authorization: Bearer \(secret)", "http://127.0.0.1:\(setup.adminPort)/metrics"], caFile: nil).status
        }
        #expect(try metrics("old-secret-0123456789abcdef-test-only") == 200)
        try writeSecret("new-secret-0123456789abcdef-test-only\n")
        // Written readable by every user: the reload warns, as start and check-config do (it did not before).
        chmod(secretPath, 0o644)
        kill(process.processIdentifier, SIGHUP)
        _ = try await self.awaitOutputLine(output, containing: "configuration reloaded")
        #expect(try metrics("old-secret-0123456789abcdef-test-only") == 401, "the rotated-out secret still works")
        #expect(try metrics("new-secret-0123456789abcdef-test-only") == 200)
        let warning = try await self.awaitOutputLine(output, containing: "\"level\":\"warning\"", "admin.secret_file")
        #expect(warning?.contains("\"generation\":\"2\"") == true, "\(warning ?? "no warning after the reload")")
        chmod(secretPath, 0o600)

        try writeSecret("short\n")
        kill(process.processIdentifier, SIGHUP)
        let refused = try await self.awaitOutputLine(output, containing: "reload refused")
        #expect(refused?.contains("too short") == true, "the refusal names the problem: \(refused ?? "no line")")
        #expect(self.outputLines(output, containing: "reload refused").count == 1)
        #expect(try metrics("new-secret-0123456789abcdef-test-only") == 200, "a refused reload keeps the secret in force")
    }

    /// Which tokengate runs, where an operator looks: the first log line of `serve`, `GET /version` and the
    /// `tokengate_build_info` gauge on the admin listener — the last two behind the admin secret, like `/metrics`.
    @Test func theVersionIsInTheStartupLogAndOnTheAdminListener() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let secret = "version-secret-0123456789abcdef-test-only"
        try secret.write(toFile: setup.directory + "/admin.secret", atomically: true, encoding: .utf8)
        let path = setup.directory + "/tokengate.yaml"
        let yaml = try String(contentsOfFile: path, encoding: .utf8).replacingOccurrences(
            of: "admin: { address: 127.0.0.1:\(setup.adminPort) }",
            with: "admin: { address: 127.0.0.1:\(setup.adminPort), secret_file: admin.secret }"
        )
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let output = setup.directory + "/serve.log"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let started = try await self.awaitOutputLine(output, containing: #""msg":"starting""#)
        #expect(started?.contains(#""version":"\#(TokengateVersion.string)""#) == true, "\(started ?? "no start line")")

        let admin = "http://127.0.0.1:\(setup.adminPort)"
        let anonymous = try Curl.run([admin + "/version"], caFile: nil)
        #expect(anonymous.status == 401, "the version is told without the admin secret: \(anonymous.body)")
        #expect(!anonymous.body.contains(TokengateVersion.string))
        let bearer = ["-H", "Authorization: Bearer \(secret)"]
        let version = try Curl.run(bearer + [admin + "/version"], caFile: nil)
        #expect(version.status == 200)
        #expect(version.body == "{\"version\":\"\(TokengateVersion.string)\"}", "\(version.body)")
        let metrics = try Curl.run(bearer + [admin + "/metrics"], caFile: nil)
        let buildInfo = metrics.body.split(separator: "\n").filter { $0.hasPrefix("tokengate_build_info") }
        #expect(buildInfo == ["tokengate_build_info{version=\"\(TokengateVersion.string)\"} 1"], "\(metrics.body.suffix(300))")
        #expect(metrics.body.contains("# TYPE tokengate_build_info gauge\n"))
    }

    /// `GET /upstreams` and `tokengate_upstream_target_healthy` from `tokengate serve`, behind the admin secret: a
    /// target nothing listens on fails its checks and is reported out of the rotation, while `/readyz` stays ready
    /// (a dead backend is not the gateway's readiness).
    @Test func upstreamHealthIsOnTheAdminListenerAndNotInReadiness() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let secret = "upstreams-secret-0123456789abcdef-test-only"
        try secret.write(toFile: setup.directory + "/admin.secret", atomically: true, encoding: .utf8)
        let path = setup.directory + "/tokengate.yaml"
        let yaml = try String(contentsOfFile: path, encoding: .utf8)
            .replacingOccurrences(
                of: "admin: { address: 127.0.0.1:\(setup.adminPort) }",
                with: "admin: { address: 127.0.0.1:\(setup.adminPort), secret_file: admin.secret }")
            .replacingOccurrences(
                of: "api: { targets: [ \"http://127.0.0.1:9\" ] }",
                with: "api: { targets: [ \"http://127.0.0.1:9\" ], health_check: { path: /healthz, interval: 200ms, timeout: 100ms, unhealthy_threshold: 1 } }")
        try yaml.write(toFile: path, atomically: true, encoding: .utf8)
        let process = try self.serveWithJSONFileStore(setup)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        try #require(try await self.waitUntilServing(setup), "serve did not come up")
        let admin = "http://127.0.0.1:\(setup.adminPort)"
        #expect(try Curl.run([admin + "/upstreams"], caFile: nil).status == 401)
        let bearer = ["-H", "Authorization: Bearer \(secret)"]
        #expect(try Curl.run(bearer + ["-X", "POST", admin + "/upstreams"], caFile: nil).status == 405)
        var body = ""
        for _ in 0..<100 where !body.contains("\"healthy\":false") {
            try await Task.sleep(for: .milliseconds(100))
            body = try Curl.run(bearer + [admin + "/upstreams"], caFile: nil).body
        }
        #expect(body.hasPrefix(#"{"upstreams":[{"name":"api","health_check":{"path":"/healthz","interval_ms":200,"timeout_ms":100},"targets":[{"target":"http://127.0.0.1:9","healthy":false,"last_check":"connect failed: Connection refused","last_check_passed":false"#), "\(body)")
        let metrics = try Curl.run(bearer + [admin + "/metrics"], caFile: nil).body
        #expect(metrics.contains("# TYPE tokengate_upstream_target_healthy gauge\n"))
        #expect(metrics.contains("tokengate_upstream_target_healthy{upstream=\"api\",target=\"http://127.0.0.1:9\"} 0\n"), "\(metrics.suffix(600))")
        #expect(try Curl.run([admin + "/readyz"], caFile: nil).status == 200)
    }

    /// Every admin endpoint answers a wrong method with 405 and `Allow`: `POST /metrics` returned the
    /// metrics, and the admin API's own `Allow` header was dropped on the way to the client.
    @Test func adminEndpointsAnswerAWrongMethodWith405AndAllow() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let process = try self.serveWithJSONFileStore(setup)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let admin = "http://127.0.0.1:\(setup.adminPort)"
        var ready = false
        for _ in 0..<100 where !ready {
            try await Task.sleep(for: .milliseconds(100))
            ready = (try? Curl.run(["--max-time", "1", admin + "/healthz"], caFile: nil).status) == 200
        }
        try #require(ready, "serve did not come up")
        for (method, endpoint, allow) in [
            ("POST", "/metrics", "GET, HEAD"), ("PUT", "/metrics", "GET, HEAD"), ("GET", "/admin/reload", "POST"),
            ("POST", "/admin/users/alice", "GET"), ("GET", "/admin/revoke-all", "POST"),
            ("POST", "/healthz", "GET, HEAD"), ("DELETE", "/readyz", "GET, HEAD"), ("POST", "/version", "GET, HEAD"),
        ] {
            let answer = try Curl.run(["-X", method, admin + endpoint], caFile: nil)
            #expect(answer.status == 405, "\(method) \(endpoint): \(answer.status) \(answer.body.prefix(80))")
            #expect(answer.header("Allow") == allow, "\(method) \(endpoint)")
            #expect(answer.body.contains("\"error\":\"method_not_allowed\""), "\(method) \(endpoint): \(answer.body.prefix(80))")
        }
        let metrics = try Curl.run([admin + "/metrics"], caFile: nil)
        #expect(metrics.status == 200)
        let head = try Curl.run(["-I", admin + "/metrics"], caFile: nil)
        #expect(head.status == 200)
        for probe in ["/healthz", "/readyz"] {
            #expect(try Curl.run([admin + probe], caFile: nil).status == 200, "\(probe)")
            #expect(try Curl.run(["-I", admin + probe], caFile: nil).status == 200, "HEAD \(probe)")
        }
    }

    @Test func refusesToStartWithoutTheStoreOrAFreshCache() throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let noCache = try ChildProcess.run("/usr/bin/timeout", ["60", Self.binary, "serve", "--config", setup.directory + "/tokengate.yaml"])
        #expect(noCache.status == 75, "the store did not answer: \(noCache.stdout) \(noCache.stderr)")
        #expect(noCache.stderr.contains("refusing to start"), "\(noCache.stderr)")

        try CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: 100)]).jsonData()
            .write(to: URL(fileURLWithPath: setup.directory + "/cutoffs.cache"))
        let old = Date(timeIntervalSinceNow: -3600)
        try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: setup.directory + "/cutoffs.cache")
        let stale = try ChildProcess.run("/usr/bin/timeout", ["60", Self.binary, "serve", "--config", setup.directory + "/tokengate.yaml"])
        #expect(stale.status == 75, "a cache older than stale_after must not be trusted: \(stale.stderr)")
    }

    @Test func startsFromAFreshCacheAndEnforcesItsCutoffs() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let now = Int64(Date().timeIntervalSince1970)
        try CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: now - 50)]).jsonData()
            .write(to: URL(fileURLWithPath: setup.directory + "/cutoffs.cache"))

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--config", setup.directory + "/tokengate.yaml"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let base = "https://localhost:\(setup.port)"
        var ready = false
        for _ in 0..<100 where !ready {
            try await Task.sleep(for: .milliseconds(100))
            ready = (try? Curl.run(["--max-time", "1", base + "/"], caFile: setup.directory + "/cert.pem").status) == 401
        }
        #expect(ready, "the gateway did not start from its cache file")
        let claims = { (user: String, iat: Int64) in
            TokenClaims(subject: user, issuedAt: iat, apiOnly: true, expiresAt: nil, notBefore: nil, issuer: nil, audience: nil)
        }
        let revoked = try setup.signer.mint(claims("bob", now - 100))
        let refused = try Curl.run(["-H", "Authorization: Bearer \(revoked)", base + "/x"], caFile: setup.directory + "/cert.pem")
        #expect(refused.status == 401, "a cutoff from the cache file must be enforced: \(refused.body)")
        #expect(refused.body.contains("revoked"))
        let readiness = try Curl.run(["http://127.0.0.1:\(setup.adminPort)/readyz"], caFile: nil)
        #expect(readiness.status == 503, "a gateway running on its cache is not ready: \(readiness.body)")
        // Once the sync service has tried the store (every second), the probe says why, by code only.
        var reason = readiness.body
        for _ in 0..<30 where !reason.contains("store_error") {
            try await Task.sleep(for: .milliseconds(100))
            reason = try Curl.run(["http://127.0.0.1:\(setup.adminPort)/readyz"], caFile: nil).body
        }
        #expect(reason.contains("\"store_error\":\"store_unavailable\""), "\(reason)")
        #expect(!reason.contains("127.0.0.1"), "the open probe does not name the database: \(reason)")
    }
}

extension ServeCommandTests {
    /// A gateway that started on its cache file has never synced with its store: `/readyz` says so, and the lag
    /// metric must say so too (an alert on the lag would otherwise see 0, the healthiest value there is). Before
    /// the first sync the lag counts from the cache file's own time.
    @Test func theSyncLagOfAGatewayOnItsCacheCountsFromTheCacheFile() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let cache = setup.directory + "/cutoffs.cache"
        try CutoffSnapshot(users: ["bob": UserCutoffs(revokedBefore: 100)]).jsonData().write(to: URL(fileURLWithPath: cache))
        // Written 40 s ago by a gateway that last synced then; stale_after is 60 s, so it is still trusted.
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -40)], ofItemAtPath: cache)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["serve", "--config", setup.directory + "/tokengate.yaml"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(try await self.waitUntilServing(setup), "the gateway did not start from its cache file")
        let admin = "http://127.0.0.1:\(setup.adminPort)"
        #expect(try Curl.run([admin + "/readyz"], caFile: nil).status == 503)
        let metrics = try Curl.run([admin + "/metrics"], caFile: nil)
        #expect(metrics.status == 200)
        func value(_ name: String) -> Double? {
            metrics.body.split(separator: "\n").first { $0.hasPrefix(name + " ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        let lag = try #require(value("tokengate_cutoff_sync_lag_seconds"), "\(metrics.body)")
        #expect(lag >= 40 && lag < 100, "the lag counts from the cache file's time: \(lag)")
        #expect(value("tokengate_cutoff_last_sync_timestamp_seconds") == 0, "this process never synced")
    }
}

extension ServeCommandTests {
    /// The reviewer's JSON file in milliseconds: a cutoff far ahead of now is enforced (fail closed), and the gateway
    /// says so: a warning naming the user and `tokengate_cutoff_future_cutoffs`. Before, neither: the user was
    /// locked out until a restart without a word.
    @Test func aCutoffFarInTheFutureIsEnforcedLoggedAndCounted() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.binary), "build the tokengate executable first")
        let setup = try self.setUp()
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let output = setup.directory + "/serve.log"
        let process = try self.serveWithJSONFileStore(setup, output: output)
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        #expect(try await self.waitUntilServing(setup))
        let admin = "http://127.0.0.1:\(setup.adminPort)"
        func futureCutoffs() throws -> Double? {
            try Curl.run([admin + "/metrics"], caFile: nil).body.split(separator: "\n")
                .first { $0.hasPrefix("tokengate_cutoff_future_cutoffs ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        #expect(try futureCutoffs() == 0)

        let now = Int64(Date().timeIntervalSince1970)
        try #"{"users": {"alice": {"revoked_before": \#(now)000}}}"#.write(
            toFile: setup.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
        var counted = try futureCutoffs()
        for _ in 0..<50 where counted != 1 {
            try await Task.sleep(for: .milliseconds(100))
            counted = try futureCutoffs()
        }
        #expect(counted == 1)
        let token = try setup.signer.mint(
            TokenClaims(subject: "alice", issuedAt: now, apiOnly: true, expiresAt: nil, notBefore: nil, issuer: nil, audience: nil))
        let refused = try Curl.run(["-H", "Authorization: Bearer \(token)", "https://localhost:\(setup.port)/x"], caFile: setup.directory + "/cert.pem")
        #expect(refused.status == 401 && refused.body.contains("revoked"), "enforced as loaded: \(refused.status) \(refused.body)")
        let warning = try await self.awaitOutputLine(output, containing: "in the future", "alice")
        #expect(warning != nil, "\((try? String(contentsOfFile: output, encoding: .utf8)) ?? "")")
        #expect(try Curl.run([admin + "/readyz"], caFile: nil).status == 200, "not a store failure")
    }
}
