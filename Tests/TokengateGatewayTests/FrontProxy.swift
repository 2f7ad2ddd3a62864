//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A real nginx or Caddy in front of a gateway's check listener and a backend, on loopback over TLS, run from
/// the example configuration in `deploy/forward-auth/` with its ports and certificate replaced: the examples a
/// site copies are the ones tested.
struct FrontProxy {
    let port: Int
    /// The proxy, run in the foreground (nginx `daemon off`, `caddy run`): a daemon would keep the descriptor
    /// Foundation's `Process` watches for its child's exit, and the start would never return.
    private let process: Process

    /// `deploy/forward-auth/` of this checkout.
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("deploy/forward-auth").path

    /// The example's addresses and files, as the test replaces them.
    static func substitute(_ text: String, directory: String, checkPort: Int, backendPort: Int) -> String {
        text.replacingOccurrences(of: "127.0.0.1:9181", with: "127.0.0.1:\(checkPort)")
            .replacingOccurrences(of: "127.0.0.1:8080", with: "127.0.0.1:\(backendPort)")
            .replacingOccurrences(of: "/etc/ssl/app.example.com/fullchain.pem", with: directory + "/cert.pem")
            .replacingOccurrences(of: "/etc/ssl/app.example.com/privkey.pem", with: directory + "/key.pem")
    }

    static func nginx(directory: String, checkPort: Int, backendPort: Int) throws -> FrontProxy {
        let port = try Self.freePort()
        let prefix = directory + "/nginx"
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        var server = try String(contentsOfFile: Self.examples + "/nginx.conf", encoding: .utf8)
        server = Self.substitute(server, directory: directory, checkPort: checkPort, backendPort: backendPort)
            .replacingOccurrences(of: "listen 443 ssl;", with: "listen 127.0.0.1:\(port) ssl;")
            .replacingOccurrences(of: "server_name app.example.com;", with: "server_name localhost;")
        try server.write(toFile: prefix + "/server.conf", atomically: true, encoding: .utf8)
        let main = """
            daemon off;
            worker_processes 1;
            pid \(prefix)/nginx.pid;
            error_log \(prefix)/error.log warn;
            events { worker_connections 64; }
            http {
                access_log off;
                client_body_temp_path \(prefix)/body;
                proxy_temp_path \(prefix)/proxy;
                fastcgi_temp_path \(prefix)/fastcgi;
                uwsgi_temp_path \(prefix)/uwsgi;
                scgi_temp_path \(prefix)/scgi;
                include \(prefix)/server.conf;
            }
            """
        try main.write(toFile: prefix + "/nginx.conf", atomically: true, encoding: .utf8)
        let process = try Self.launch("/usr/sbin/nginx", ["-p", prefix, "-c", prefix + "/nginx.conf"], environment: nil, log: prefix + "/out.log")
        let proxy = FrontProxy(port: port, process: process)
        try proxy.waitUntilListening()
        return proxy
    }

    static func caddy(directory: String, checkPort: Int, backendPort: Int) throws -> FrontProxy {
        let port = try Self.freePort()
        let prefix = directory + "/caddy"
        try FileManager.default.createDirectory(atPath: prefix, withIntermediateDirectories: true)
        var site = try String(contentsOfFile: Self.examples + "/Caddyfile", encoding: .utf8)
        site = Self.substitute(site, directory: directory, checkPort: checkPort, backendPort: backendPort)
            .replacingOccurrences(
                of: "app.example.com {", with: "https://localhost:\(port) {\n\tbind 127.0.0.1\n\ttls \(directory)/cert.pem \(directory)/key.pem")
        let global = """
            {
            \tadmin unix/\(prefix)/admin.sock
            \tauto_https disable_redirects
            \tskip_install_trust
            \tstorage file_system \(prefix)/data
            }

            """
        try (global + site).write(toFile: prefix + "/Caddyfile", atomically: true, encoding: .utf8)
        let process = try Self.launch(
            "/usr/bin/caddy", ["run", "--config", prefix + "/Caddyfile", "--adapter", "caddyfile"],
            environment: ["HOME": prefix, "XDG_DATA_HOME": prefix + "/data", "XDG_CONFIG_HOME": prefix + "/config", "PATH": "/usr/bin:/bin"],
            log: prefix + "/out.log")
        let proxy = FrontProxy(port: port, process: process)
        try proxy.waitUntilListening()
        return proxy
    }

    private static func launch(_ executable: String, _ arguments: [String], environment: [String: String]?, log: String) throws -> Process {
        FileManager.default.createFile(atPath: log, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        process.standardInput = FileHandle.nullDevice
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        return process
    }

    /// Stops the proxy this test started, and waits for it.
    func stop() {
        guard self.process.isRunning else { return }
        self.process.terminate()
        self.process.waitUntilExit()
    }

    private func waitUntilListening() throws {
        for _ in 0..<250 {
            if Self.accepts(port: self.port) { return }
            guard self.process.isRunning else { throw FrontProxyError("the front proxy exited (\(self.process.terminationStatus))") }
            usleep(20_000)
        }
        throw FrontProxyError("the front proxy is not listening on \(self.port)")
    }

    private static func accepts(port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = Self.loopback(port: 0)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// A port the kernel picks on loopback, free when this returns (the proxy binds it right after).
    private static func freePort() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw FrontProxyError("no socket") }
        defer { close(socket) }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw FrontProxyError("bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct FrontProxyError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
