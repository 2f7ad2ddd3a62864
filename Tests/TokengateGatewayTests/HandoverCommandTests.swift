//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Glibc
import Testing
import TokengateTLS

/// Restarts and upgrades without a gap, with the real `tokengate serve` process: the binary hand-over on SIGUSR2
/// under a loop of real curl clients (HTTP/1.1 and HTTP/2 over TLS, kept-alive and new connections), and
/// systemd's socket activation through systemd's own `systemd-socket-activate` (package `systemd`).
@Suite(.serialized)
struct HandoverCommandTests {
    private struct Setup {
        let directory: String
        let port: Int
        let adminPort: Int
        /// The path the gateway is started by: a symlink to the built binary, replaced by the "new binary".
        var executable: String { self.directory + "/tokengate" }
        var configuration: String { self.directory + "/tokengate.yaml" }
        var caFile: String { self.directory + "/cert.pem" }
    }

    /// A TLS listener whose one route forwards to a real HTTP server (Python's `http.server`, serving `hello`),
    /// an admin listener, a JSON-file cutoff store.
    private func setUp(backendPort: Int) throws -> Setup {
        let directory = NSTemporaryDirectory() + "tokengate-handover-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory + "/site", withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost"])
        try certificate.certificatePEM.write(toFile: directory + "/cert.pem", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: directory + "/key.pem", atomically: true, encoding: .utf8)
        try "hello\n".write(toFile: directory + "/site/hello", atomically: true, encoding: .utf8)
        try "{}".write(toFile: directory + "/cutoffs.json", atomically: true, encoding: .utf8)
        let port = try GatewayIntegrationTests.unusedPort()
        let adminPort = try GatewayIntegrationTests.unusedPort()
        let yaml = """
            listen:
              - address: 127.0.0.1:\(port)
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            admin: { address: 127.0.0.1:\(adminPort) }
            cutoffs: { file: cutoffs.json }
            upstreams:
              site: { targets: [ "http://127.0.0.1:\(backendPort)" ] }
            routes:
              - { path_prefix: /, upstream: site, accept: none }
            limits: { drain_timeout: 10s }
            """
        try yaml.write(toFile: directory + "/tokengate.yaml", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: directory + "/tokengate", withDestinationPath: ServeCommandTests.binary)
        return Setup(directory: directory, port: port, adminPort: adminPort)
    }

    private func startBackend(port: Int, directory: String) throws -> Process {
        let backend = Process()
        backend.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        backend.arguments = ["-m", "http.server", "--bind", "127.0.0.1", "--directory", directory, String(port)]
        backend.standardOutput = FileHandle.nullDevice
        backend.standardError = FileHandle.nullDevice
        try backend.run()
        return backend
    }

    private func start(_ command: [String], environment: [String: String] = [:], output: String) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let handle = FileHandle(forWritingAtPath: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// Up to `attempts` tenths of a second until `https://localhost:port/hello` answers 200.
    private func waitUntilServing(port: Int, caFile: String, attempts: Int = 100) async throws -> Bool {
        for _ in 0..<attempts {
            if (try? Curl.run(["--max-time", "1", "https://localhost:\(port)/hello"], caFile: caFile).status) == 200 { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    private func waitForLine(_ output: String, containing parts: String..., seconds: Int = 10) async throws -> Substring? {
        for _ in 0..<(seconds * 20) {
            let lines = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n")
            if let line = lines.first(where: { line in parts.allSatisfy { line.contains($0) } }) { return line }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Replaces `path` in one rename, as an installer replaces a binary.
    private func replace(_ path: String, withScript script: String) throws {
        let temporary = path + ".new"
        try script.write(toFile: temporary, atomically: false, encoding: .utf8)
        chmod(temporary, 0o755)
        guard rename(temporary, path) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
    }

    private func alive(_ pid: pid_t) -> Bool { kill(pid, 0) == 0 }

    /// SIGTERM, then up to 10 s for `process` to exit (SIGKILL after that): true when it exited by itself.
    private func stop(_ process: Process) async throws -> Bool {
        guard process.isRunning else { return true }
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<200 where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        guard process.isRunning else { return true }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return false
    }

    /// A client loop across two SIGUSR2s: the first finds a new binary that exits at once (the old process keeps
    /// serving and logs why), the second one that serves. Three real curl loops run throughout: HTTP/1.1 and
    /// HTTP/2, 20 requests per connection, and one request per new connection. Every request gets its 200; the old
    /// process tells systemd (the test's notify socket) the new main process id, drains and exits 0, and the new
    /// binary serves on the same port.
    @Test func aBinaryHandOverUnderLoadFailsNoRequest() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let backendPort = try GatewayIntegrationTests.unusedPort()
        let setup = try self.setUp(backendPort: backendPort)
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let backend = try self.startBackend(port: backendPort, directory: setup.directory + "/site")
        defer {
            // SIGKILL: the test process's threads block SIGTERM, and a child started from one inherits the mask.
            kill(backend.processIdentifier, SIGKILL)
            backend.waitUntilExit()
        }
        let notify = try NotifySocket(address: "@tokengate-handover-\(UUID().uuidString)")
        let output = setup.directory + "/output"
        let old = try self.start(
            [setup.executable, "serve", "--config", setup.configuration], environment: ["NOTIFY_SOCKET": notify.address], output: output)
        var newPID: pid_t?
        defer {
            if old.isRunning { kill(old.processIdentifier, SIGKILL) }
            if let newPID, self.alive(newPID) { kill(newPID, SIGKILL) }
        }
        #expect(notify.receiveSkippingWatchdog() == "READY=1")
        #expect(notify.lastSender == old.processIdentifier)
        try #require(try await self.waitUntilServing(port: setup.port, caFile: setup.caFile), "serve did not come up")

        // The clients: each loop runs until the stop file appears (or 60 s), one line per request.
        let stop = setup.directory + "/stop"
        let url = "https://localhost:\(setup.port)/hello"
        let loops = ["h1": "--http1.1", "h2": "--http2", "new": "--http1.1"].map { name, version in
            let perConnection = name == "new" ? 1 : 20
            let urls = Array(repeating: "-o /dev/null \(url)", count: perConnection).joined(separator: " ")
            let script = """
                end=$((SECONDS + 60))
                while [ ! -e \(stop) ] && [ $SECONDS -lt $end ]; do
                  curl -s \(version) --cacert \(setup.caFile) --max-time 10 -w '%{http_code} %{http_version}\\n' \(urls) \
                    || echo "curl exit $?"
                done
                """
            return (name, script)
        }
        var clients: [(String, Process)] = []
        for (name, script) in loops {
            clients.append((name, try self.start(["/bin/bash", "-c", script], output: setup.directory + "/client-\(name)")))
        }
        defer { for (_, client) in clients where client.isRunning { kill(client.processIdentifier, SIGKILL) } }
        try await Task.sleep(for: .milliseconds(700))

        // A new binary that does not start: the old process keeps serving, and says why.
        try self.replace(setup.executable, withScript: "#!/bin/sh\necho 'new binary: refusing' >&2\nexit 3\n")
        kill(old.processIdentifier, SIGUSR2)
        let refusal = try await self.waitForLine(output, containing: "binary hand-over failed", "exited with status 3")
        #expect(refusal != nil, "no log line for the failed hand-over")
        // systemd saw the unit "reloading", then "active" again with the same main process.
        let failedBegin = notify.receiveSkippingWatchdog()
        #expect(failedBegin?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") == true, "\(failedBegin ?? "nothing")")
        #expect(notify.receiveSkippingWatchdog() == "READY=1", "no READY=1 after the failed hand-over")
        #expect(notify.lastSender == old.processIdentifier)
        try await Task.sleep(for: .milliseconds(500))
        #expect(old.isRunning)

        // The new binary: the built one, started through a script that leaves a mark.
        let mark = setup.directory + "/new-binary-ran"
        try self.replace(setup.executable, withScript: "#!/bin/sh\necho $$ > \(mark)\nexec \(ServeCommandTests.binary) \"$@\"\n")
        kill(old.processIdentifier, SIGUSR2)
        let begin = notify.receiveSkippingWatchdog()
        #expect(begin?.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") == true, "\(begin ?? "nothing")")
        // MAINPID= and READY=1 in one message from the old process, the main one (NotifyAccess=main): systemd
        // takes the new main process id first, then leaves "reloading".
        let mainPID = try #require(notify.receiveSkippingWatchdog(), "no MAINPID= from the old process")
        #expect(notify.lastSender == old.processIdentifier, "MAINPID= came from \(notify.lastSender.map { "\($0)" } ?? "an unknown sender")")
        let fields = mainPID.split(separator: "\n")
        #expect(fields.count == 2 && fields.first?.hasPrefix("MAINPID=") == true && fields.last == "READY=1", "\(mainPID)")
        newPID = fields.first.flatMap { pid_t($0.dropFirst("MAINPID=".count)) }
        let pid = try #require(newPID)
        #expect(pid != old.processIdentifier)
        #expect((try? String(contentsOfFile: mark, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) == "\(pid)")
        // The old process drains and exits 0, without STOPPING=1 (systemd follows the new main process).
        for _ in 0..<200 where old.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!old.isRunning, "the old process did not exit after the hand-over")
        if !old.isRunning { #expect(old.terminationReason == .exit && old.terminationStatus == 0) }
        #expect(notify.receive(timeout: 1) == nil, "a notification after MAINPID= from the old process")
        #expect(self.alive(pid))
        try await Task.sleep(for: .milliseconds(700))
        FileManager.default.createFile(atPath: stop, contents: nil)
        for (_, client) in clients {
            for _ in 0..<400 where client.isRunning { try await Task.sleep(for: .milliseconds(50)) }
            if client.isRunning { kill(client.processIdentifier, SIGKILL) }
        }

        // Every request of every loop answered 200, over the protocol it asked for.
        var counts: [String] = []
        defer { print("hand-over clients: \(counts.sorted().joined(separator: ", ")) requests") }
        for (name, _) in clients {
            let lines = ((try? String(contentsOfFile: setup.directory + "/client-\(name)", encoding: .utf8)) ?? "").split(separator: "\n")
            counts.append("\(name) \(lines.count)")
            let version = name == "h2" ? "200 2" : "200 1.1"
            let failed = lines.filter { $0 != version }
            // On a failure, the gateway's warnings and errors say which connection was cut, and why.
            let gatewayLines = ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n")
            let trouble = gatewayLines.filter { $0.contains("\"warning\"") || $0.contains("\"error\"") }.suffix(10)
            #expect(failed.isEmpty, "\(name): \(failed.count) of \(lines.count) requests failed: \(Array(Set(failed).prefix(5))); gateway: \(Array(trouble))")
            #expect(lines.count >= (name == "new" ? 10 : 60), "\(name): only \(lines.count) requests")
        }
        // The new process serves on the same port, from the same listening socket.
        let after = try Curl.run([url], caFile: setup.caFile)
        #expect(after.status == 200)
        let passed = try await self.waitForLine(output, containing: "\"listening\"", "\"socket\":\"passed\"")
        #expect(passed != nil, "the new process did not log its passed listener")
        kill(pid, SIGTERM)
        // The new process, systemd's main one now, says it stops.
        #expect(notify.receiveSkippingWatchdog(timeout: 10) == "STOPPING=1")
        #expect(notify.lastSender == pid)
        for _ in 0..<200 where self.alive(pid) { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!self.alive(pid), "the new process did not stop on SIGTERM")
        newPID = nil
    }

    /// systemd's socket activation, through systemd's own launcher: `systemd-socket-activate` binds the port,
    /// and execs the gateway with the socket as descriptor 3 (`LISTEN_FDS`, `LISTEN_PID`, `LISTEN_FDNAMES`), which
    /// serves on it and binds the admin listener itself. A socket on an address the configuration does not name is
    /// refused at start (exit 78) with a message that names the socket and the listeners.
    @Test func socketActivationServesOnThePassedSocketAndRefusesAStrangeOne() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: ServeCommandTests.binary), "build the tokengate executable first")
        let activate = "/usr/bin/systemd-socket-activate"
        try #require(FileManager.default.isExecutableFile(atPath: activate), "systemd-socket-activate (package systemd) is missing")
        let backendPort = try GatewayIntegrationTests.unusedPort()
        let setup = try self.setUp(backendPort: backendPort)
        defer { try? FileManager.default.removeItem(atPath: setup.directory) }
        let backend = try self.startBackend(port: backendPort, directory: setup.directory + "/site")
        defer {
            // SIGKILL: the test process's threads block SIGTERM, and a child started from one inherits the mask.
            kill(backend.processIdentifier, SIGKILL)
            backend.waitUntilExit()
        }
        // One shell runs the launcher and the clients, so that the test waits on one process, bounded by `timeout`.
        let output = setup.directory + "/output"
        let strangePort = try GatewayIntegrationTests.unusedPort()
        let curl = "curl -s -o /dev/null -w '%{http_code}' --max-time 2 --cacert \(setup.caFile)"
        let script = """
            \(activate) -l 127.0.0.1:\(setup.port) --fdname=tokengate \(ServeCommandTests.binary) serve --config \(setup.configuration) >> \(output) 2>&1 &
            gateway=$!
            for i in $(seq 50); do [ "$(\(curl) https://localhost:\(setup.port)/hello)" = 200 ] && break; sleep 0.2; done
            echo "served $(\(curl) https://localhost:\(setup.port)/hello)"
            kill -TERM $gateway; wait $gateway; echo "stopped $?"
            \(activate) -l 127.0.0.1:\(strangePort) \(ServeCommandTests.binary) serve --config \(setup.configuration) > \(setup.directory)/strange 2>&1 &
            refused=$!
            for i in $(seq 25); do \(curl) https://127.0.0.1:\(strangePort)/ > /dev/null; grep -q Execing \(setup.directory)/strange && break; sleep 0.2; done
            wait $refused; echo "refused $?"
            """
        let shell = try self.start(["/usr/bin/timeout", "-k", "5", "60", "/bin/bash", "-c", script], output: setup.directory + "/shell")
        defer { if shell.isRunning { kill(shell.processIdentifier, SIGKILL) } }
        for _ in 0..<1300 where shell.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        let lines = ((try? String(contentsOfFile: setup.directory + "/shell", encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(lines.contains("served 200"), "no answer on the passed socket: \(lines)")
        #expect(lines.contains("stopped 0"), "the socket-activated gateway did not exit 0 on SIGTERM: \(lines)")
        #expect(lines.contains("refused 78"), "a socket without a listener was not refused with 78: \(lines)")
        #expect(try await self.waitForLine(output, containing: "\"listening\"", "\(setup.port)", "\"socket\":\"passed\"") != nil)
        #expect(try await self.waitForLine(output, containing: "admin listening", "\(setup.adminPort)") != nil)
        let message = (try? String(contentsOfFile: setup.directory + "/strange", encoding: .utf8)) ?? ""
        #expect(
            message.contains("passed socket 3 on 127.0.0.1:\(strangePort) matches no configured listener (listen[0] (127.0.0.1:\(setup.port)), admin (127.0.0.1:\(setup.adminPort)))"),
            "\(message)")
    }
}
