//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import NIOCore
import NIOPosix
import TokengateConfig
import TokengateDemo
import TokengateGateway
import TokengateTLS
import TokengateTokens

/// A real gateway on loopback for integration tests: a fresh temp directory with a generated
/// certificate and keys (nothing committed), a demo backend, and the gateway in front of it, both on
/// ports the kernel picks.
final class GatewayHarness: @unchecked Sendable {
    // @unchecked: set up once in `start` before any test reads it, then only read.
    let directory: String
    var backend: DemoBackend!
    var server: GatewayServer!
    var tlsPort = 0
    var plainPort = 0
    /// The ports of the listeners `listeners:` added, in order.
    var extraPorts: [Int] = []
    var signer: TokenSigner!
    let cutoffs = CutoffSnapshotHolder(.empty)
    let group: MultiThreadedEventLoopGroup
    var logLines: LogCapture

    init() {
        self.directory = NSTemporaryDirectory() + "tokengate-test-" + UUID().uuidString
        self.group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
        self.logLines = LogCapture()
    }

    var certificatePath: String { self.directory + "/cert.pem" }

    /// Starts backend and gateway. `routes` is the YAML of the routes section; `{UPSTREAM}` in
    /// `upstreams` is replaced by the backend's address; `tls` is the TLS listener's `tls:` value (files
    /// other than the generated `cert.pem` and `key.pem` must be in ``directory`` before the start). `keys` is
    /// the whole `keys` line (empty for none) and `tokens` an optional `tokens:` section, `sections` any other
    /// top-level sections (`issuers:`, `rate_limits:`) and `listener` more keys of the TLS listener
    /// (`proxy_protocol:`, `ip_rules:`); files they name may be written to ``directory`` beforehand. `listeners`
    /// are more `listen:` items (YAML lines indented as the two above), bound after them (``extraPorts``).
    func start(
        routes: String = GatewayHarness.defaultRoutes,
        upstreams: String? = nil,
        limits: String = "",
        plainHTTP: String = "reject",
        tls: String = "{ certificates: [ { cert: cert.pem, key: key.pem } ] }",
        keys: String = "keys: [ { jwks: public.jwks } ]",
        tokens: String = "",
        sections: String = "",
        listener: String = "",
        listeners: String = "",
        now: (@Sendable () -> Int64)? = nil
    ) async throws {
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
        try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
        let generated = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-hs")
        try generated.privateJWKS.write(toFile: self.directory + "/private.jwks", atomically: true, encoding: .utf8)
        try generated.publicJWKS.write(toFile: self.directory + "/public.jwks", atomically: true, encoding: .utf8)
        self.signer = try TokenSigner(privateJWKS: Array(generated.privateJWKS.utf8))

        self.backend = try await DemoBackend.start(port: 0, group: self.group)
        let upstreamYAML = (upstreams ?? "  api: { targets: [ \"http://127.0.0.1:{UPSTREAM}\" ], connect_timeout: 1s, response_timeout: 2s }")
            .replacingOccurrences(of: "{UPSTREAM}", with: String(self.backend.port))
        let yaml = """
            listen:
              - address: 127.0.0.1:0
                tls: \(tls)
                \(listener)
              - address: 127.0.0.1:0
                plain_http: \(plainHTTP)
            \(listeners)
            \(keys)
            \(tokens)
            \(sections)
            cutoffs: { file: cutoffs.json }
            realm: test.example
            upstreams:
            \(upstreamYAML)
            routes:
            \(routes)
            \(limits)
            """
        try "{}".write(toFile: self.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
        try yaml.write(toFile: self.directory + "/tokengate.yaml", atomically: true, encoding: .utf8)
        let configuration = try GatewayConfiguration.load(path: self.directory + "/tokengate.yaml")
        let capture = self.logLines
        var logger = Logger(label: "tokengate-test") { label in capture.handler(label: label) }
        logger.logLevel = .info
        self.server = try GatewayServer(configuration: configuration, cutoffs: self.cutoffs, group: self.group, logger: logger, now: now)
        let addresses = try await self.server.start()
        self.tlsPort = addresses[0].port!
        self.plainPort = addresses[1].port!
        self.extraPorts = addresses.dropFirst(2).map { $0.port! }
    }

    static let defaultRoutes = """
          - { path_prefix: /api/, upstream: api, accept: [api], sources: [authorization, "cookie:auth_token", "form:access_token", "json:token", "header:X-Api-Token"] }
          - { path_prefix: /account/, upstream: api, accept: [session], sources: ["cookie:session"] }
          - { path_prefix: /both/, upstream: api, accept: [api, session], sources: [authorization] }
          - { path_prefix: /keep/, upstream: api, accept: [api], sources: [authorization], forward_token: keep }
          - { path_prefix: /, upstream: api, accept: none }
        """

    func stop() async {
        await self.server?.shutdown(drainTimeout: .seconds(1))
        try? await self.backend?.stop()
        try? await self.group.shutdownGracefully()
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    func mint(_ subject: String, apiOnly: Bool = true, issuedAt: Int64? = nil) throws -> String {
        try self.signer.mint(
            TokenClaims(
                subject: subject,
                issuedAt: issuedAt ?? Int64(Date().timeIntervalSince1970) - 5,
                apiOnly: apiOnly,
                expiresAt: nil,
                notBefore: nil,
                issuer: nil,
                audience: nil
            )
        )
    }

    var baseURL: String { "https://localhost:\(self.tlsPort)" }
}

/// Collects every log line the gateway writes, rendered by the product's JSON handler, so tests can
/// check what a log holds (and what it must never hold).
final class LogCapture: @unchecked Sendable {
    // @unchecked: all access goes through `lock`.
    private let lock = NSLock()
    private var lines: [String] = []

    func handler(label: String) -> any LogHandler {
        CapturingLogHandler(capture: self)
    }

    func append(_ line: String) {
        self.lock.lock()
        self.lines.append(line)
        self.lock.unlock()
    }

    var all: [String] {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.lines
    }
}

struct CapturingLogHandler: LogHandler {
    let capture: LogCapture
    var logLevel: Logger.Level = .debug
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = self.metadata.merging(event.metadata ?? [:]) { _, new in new }
        let rendered = merged.keys.sorted().map { "\($0)=\(merged[$0]!)" }.joined(separator: " ")
        self.capture.append("\(event.level) \(event.message) \(rendered)")
    }
}
