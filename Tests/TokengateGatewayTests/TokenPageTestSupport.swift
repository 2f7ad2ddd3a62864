//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//


#if canImport(FoundationNetworking)
import Foundation
import FoundationNetworking
import Logging
import NIOCore
import NIOPosix
import TokengateClient
import TokengateConfig
import TokengateDemo
import TokengateGateway
import TokengateStores
import TokengateTLS
import TokengateTokens
#endif

/// A clock the tests move by hand, shared by the gateway and the demo RP: revocation compares whole seconds
/// (`iat < revoked_before`), so a flow that runs within one real second needs time to pass on purpose.
final class TokenPageTestClock: @unchecked Sendable {
    // @unchecked: every access goes through `lock`.
    private let lock = NSLock()
    private var seconds: Int64

    /// When the clock was made, on the system's monotonic clock (nanoseconds).
    private let started = DispatchTime.now().uptimeNanoseconds

    init(_ start: Int64 = Int64(Date().timeIntervalSince1970)) {
        self.seconds = start
    }

    /// The hand-moved seconds in milliseconds, plus the real time since the clock was made: the confirmation
    /// page's minimum delay (one second) passes by waiting (a browser's click) or by ``advance(by:)``, and
    /// the page's 5 minutes by ``advance(by:)``.
    var nowMilliseconds: Int64 {
        let elapsed = Int64((DispatchTime.now().uptimeNanoseconds - self.started) / 1_000_000)
        return self.now * 1000 + elapsed
    }

    var now: Int64 {
        self.lock.lock()
        defer { self.lock.unlock() }
        return self.seconds
    }

    func advance(by delta: Int64) {
        self.lock.lock()
        self.seconds += delta
        self.lock.unlock()
    }
}

/// The seed's whole flow on loopback: the demo RP behind a real gateway with a token page, over real TLS.
final class TokenPageHarness: @unchecked Sendable {
    // @unchecked: set up once in `start` before any test reads it, then only read.
    let directory = NSTemporaryDirectory() + "tokengate-tokenpage-" + UUID().uuidString
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 2)
    let cutoffs = CutoffSnapshotHolder(.empty)
    let clock = TokenPageTestClock()
    let logLines = LogCapture()
    var rp: DemoRP!
    var server: GatewayServer!
    var tlsPort = 0
    /// With ``devices``: the SQLite store's sync service, which publishes into ``cutoffs``.
    var sync: CutoffSyncService?
    var store: SQLiteCutoffStore?
    /// The connected-apps page (`connected_apps: /token/apps`) over a SQLite store that keeps devices: the page's
    /// tokens carry one, and the store lists and revokes them.
    let devices: Bool
    /// The page mints Flask session cookies (`mint: flask`, signed with ``flaskSecret``) instead of JWTs, and
    /// `/api/` also accepts them (api-only) from `X-App-Session`.
    let mintsFlask: Bool

    static let flaskSecret = "test-only flask secret key"

    init(devices: Bool = false, mintsFlask: Bool = false) {
        self.devices = devices
        self.mintsFlask = mintsFlask
    }

    static let connectedAppsPath = "/token/apps"

    static let callback = "tokengate-demo://token"
    /// An app with `pkce: required`.
    static let androidCallback = "tokengate-demo://android"
    /// The harness's apps `ios` and `android` are configured with `confirm: false`, so the tests of what the page
    /// delivers go on as before; `consent` is a custom-scheme app left at the default (the page asks first), `web`
    /// an https app at its default (it does not) and `web-confirm` one with `confirm: true`.
    static let consentCallback = "tokengate-demo://consent"
    static let webCallback = "https://app.example/callback"

    var baseURL: String { "https://localhost:\(self.tlsPort)" }
    var certificatePath: String { self.directory + "/cert.pem" }

    /// A started harness for `body`, stopped afterwards whatever happens.
    static func with(
        devices: Bool = false, mintsFlask: Bool = false, _ body: (TokenPageHarness) async throws -> Void
    ) async throws {
        let harness = TokenPageHarness(devices: devices, mintsFlask: mintsFlask)
        do {
            try await harness.start()
            try await body(harness)
        } catch {
            await harness.stop()
            throw error
        }
        await harness.stop()
    }

    func start() async throws {
        try FileManager.default.createDirectory(atPath: self.directory, withIntermediateDirectories: true)
        let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1"])
        try certificate.certificatePEM.write(toFile: self.directory + "/cert.pem", atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: self.directory + "/key.pem", atomically: true, encoding: .utf8)
        let keys = try KeyGenerator.generate(algorithm: .hs256, keyID: "test-only-tokenpage")
        try keys.privateJWKS.write(toFile: self.directory + "/private.jwks", atomically: true, encoding: .utf8)
        try keys.publicJWKS.write(toFile: self.directory + "/public.jwks", atomically: true, encoding: .utf8)
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))

        let clock = self.clock
        let cutoffs = self.cutoffs
        self.rp = try await DemoRP.start(port: 0, group: self.group, signer: signer, now: { clock.now }) { change in
            Self.apply(change, to: cutoffs)
        }
        // The RP answers a password change or "disable mobile apps" only once its cutoff write, a Swift task,
        // has run; in a parallel run the other suites' blocking subprocess calls (curl, openssl, sleeps) can
        // hold every thread of the concurrency pool for seconds, so the response timeout is generous here:
        // no test of this harness is about it (2 s made the seed flow fail with 504 in full runs).
        let yaml = """
            listen:
              - address: 127.0.0.1:0
                tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
            keys: [ { jwks: public.jwks } ]
            signing_key: { jwks: private.jwks }
            cutoffs: \(self.devices ? "{ sqlite: cutoffs.db }" : "{ file: cutoffs.json }")
            realm: test.example
            upstreams:
              rp: { targets: [ "http://127.0.0.1:\(self.rp.port)" ], connect_timeout: 1s, response_timeout: 15s }
            routes:
              - { path_prefix: /api/, upstream: rp, accept: [api], sources: [authorization, "form:access_token"]\(self.mintsFlask ? ", session_cookie: { issuer: flask, sources: [\"header:X-App-Session\"] }" : "") }
              - { path_prefix: /account/, upstream: rp, accept: [session], sources: ["cookie:session"] }
              - path_prefix: /token
                kind: token_page
                login: { session_cookie: session, login_url: /login }\(self.devices ? "\n    connected_apps: \(Self.connectedAppsPath)" : "")\(self.mintsFlask ? "\n    mint: flask" : "")
                apps:
                  - { name: ios, callback: "\(Self.callback)", confirm: false }
                  - { name: android, callback: "\(Self.androidCallback)", pkce: required, confirm: false }
                  - { name: consent, callback: "\(Self.consentCallback)", pkce: required, display_name: "Demo <App>" }
                  - { name: web, callback: "\(Self.webCallback)" }
                  - { name: web-confirm, callback: "\(Self.webCallback)", confirm: true }
              - { path_prefix: /, upstream: rp, accept: none }
            """ + (self.mintsFlask ? """

            issuers:
              - { name: flask, kind: session_cookie, format: flask, secret_file: flask.secret, fields: { user_id: /_user_id, login_time: /login_at, api_only: /api_only } }
            """ : "")
        try Self.flaskSecret.write(toFile: self.directory + "/flask.secret", atomically: true, encoding: .utf8)
        try "{}".write(toFile: self.directory + "/cutoffs.json", atomically: true, encoding: .utf8)
        try yaml.write(toFile: self.directory + "/tokengate.yaml", atomically: true, encoding: .utf8)
        let configuration = try GatewayConfiguration.load(path: self.directory + "/tokengate.yaml")
        let capture = self.logLines
        var logger = Logger(label: "tokengate-test") { _ in CapturingLogHandler(capture: capture) }
        logger.logLevel = .debug
        var registry: DeviceRegistry?
        if self.devices {
            let store = try await SQLiteCutoffStore.open(path: self.directory + "/cutoffs.db")
            let sync = CutoffSyncService(store: store, logger: logger, now: { clock.now }, publish: { cutoffs.store($0) })
            self.store = store
            try await sync.start()
            self.sync = sync
            registry = DeviceRegistry(
                record: { try await sync.recordDevice($0) }, refresh: { try await sync.rotateRefresh($0) },
                changes: sync.deviceChanges)
        }
        self.server = try GatewayServer(
            configuration: configuration,
            cutoffs: self.cutoffs,
            group: self.group,
            logger: logger,
            now: { clock.now },
            nowMilliseconds: { clock.nowMilliseconds },
            devices: registry
        )
        self.tlsPort = try await self.server.start()[0].port!
    }

    func stop() async {
        await self.server?.shutdown(drainTimeout: .seconds(1))
        try? await self.store?.close()
        try? await self.rp?.stop()
        try? await self.group.shutdownGracefully()
        try? FileManager.default.removeItem(atPath: self.directory)
    }

    /// What a cutoff store does with the RP's change: a new snapshot with the user's cutoff moved.
    static func apply(_ change: DemoRP.CutoffChange, to holder: CutoffSnapshotHolder) {
        let current = holder.load()
        var users = current.users
        var user = users[CutoffUserKey(change.user)] ?? UserCutoffs()
        switch change.kind {
        case .passwordChanged: user.revokedBefore = change.at
        case .mobileAppsDisabled: user.apiRevokedBefore = change.at
        }
        users[CutoffUserKey(change.user)] = user
        holder.store(
            CutoffSnapshot(globalRevokedBefore: current.globalRevokedBefore, users: users, generation: current.generation + 1)
        )
    }

    // MARK: The browser and the app, with curl.

    func curl(_ arguments: [String]) throws -> Curl.Result {
        try Curl.run(arguments, caFile: self.certificatePath)
    }

    /// Sends a `URLRequest` built by the client library, exactly as built (method, headers, body).
    func send(_ request: URLRequest) throws -> Curl.Result {
        var arguments = ["-X", request.httpMethod ?? "GET"]
        for (name, value) in (request.allHTTPHeaderFields ?? [:]).sorted(by: { $0.key < $1.key }) {
            arguments += ["-H", "\(name): \(value)"]
        }
        if let body = request.httpBody {
            arguments += ["--data-binary", String(decoding: body, as: UTF8.self)]
        }
        arguments.append(request.url!.absoluteString)
        return try self.curl(arguments)
    }
}

extension Curl.Result {
    /// Every value of a header (curl's `-D` output keeps each line).
    func headers(_ name: String) -> [String] {
        self.headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    /// The `<title>` of an HTML body.
    var title: String? {
        guard let start = self.body.range(of: "<title>"), let end = self.body.range(of: "</title>") else { return nil }
        return String(self.body[start.upperBound..<end.lowerBound])
    }
}
