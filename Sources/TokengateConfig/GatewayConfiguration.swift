//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Yams

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The whole gateway configuration: plain typed values, validated at load (DESIGN §6).
///
/// Loading either returns a configuration in which every cross-reference resolves and every file exists, or
/// throws one ``ConfigurationError`` naming the file, line, column and key path of the first problem
/// (``loadReportingEveryProblem(path:checkFiles:environment:)``: all of them). The
/// gateway turns these values into runtime objects (TLS contexts, key sets, pools); nothing here opens a socket
/// or reads a key.
public struct GatewayConfiguration: Sendable, Equatable {
    public var listeners: [ListenerConfiguration]
    public var admin: AdminConfiguration?
    public var keys: [KeySourceConfiguration]
    public var signingKey: SigningKeyConfiguration?
    public var tokens: TokenSettings
    public var cutoffs: CutoffStoreConfiguration
    public var upstreams: [String: UpstreamConfiguration]
    /// In file order; the gateway's route table decides which one matches a request.
    public var routes: [RouteConfiguration]
    public var limits: LimitsConfiguration
    /// The `realm` of `WWW-Authenticate: Bearer`. Default `tokengate`.
    public var realm: String
    /// Peers whose `X-Forwarded-Proto: https` and `X-Forwarded-For` are believed. Default: none.
    public var trustedProxies: [CIDR]
    /// The brute-force guards and the bound on every rate limit's memory (`rate_limits`).
    public var rateLimits = RateLimitSettings()
    public var log: LogConfiguration
    public var http2: HTTP2Configuration
    public var hsts: HSTSConfiguration
    /// How many event loops (threads) serve connections; `nil` means one per core. The load bench pins the
    /// gateway to one core with `event_loops: 1`.
    public var eventLoops: Int?
    /// `issuers:`, by name: the sites whose own login cookies routes accept (`session_cookie:` on a route).
    public var sessionCookieIssuers: [String: SessionCookieIssuerConfiguration]
    /// `issuers:` items of `kind: jwt`, by name: token issuers besides the top-level `keys` and `tokens`, each
    /// picked by the `iss` of its tokens.
    public var jwtIssuers: [String: JWTIssuerConfiguration] = [:]
    /// The configuration file as the caller named it (`<memory>` style names for in-memory text).
    public var sourcePath: String

    /// Files larger than this are refused before parsing: a real configuration is a few KiB.
    public static let maximumFileSize = 1024 * 1024

    public init(
        listeners: [ListenerConfiguration],
        admin: AdminConfiguration? = nil,
        keys: [KeySourceConfiguration],
        signingKey: SigningKeyConfiguration? = nil,
        tokens: TokenSettings = TokenSettings(),
        cutoffs: CutoffStoreConfiguration,
        upstreams: [String: UpstreamConfiguration],
        routes: [RouteConfiguration],
        limits: LimitsConfiguration = LimitsConfiguration(),
        realm: String = "tokengate",
        trustedProxies: [CIDR] = [],
        log: LogConfiguration = LogConfiguration(),
        http2: HTTP2Configuration = HTTP2Configuration(),
        hsts: HSTSConfiguration = HSTSConfiguration(),
        eventLoops: Int? = nil,
        sessionCookieIssuers: [String: SessionCookieIssuerConfiguration] = [:],
        sourcePath: String
    ) {
        self.listeners = listeners
        self.admin = admin
        self.keys = keys
        self.signingKey = signingKey
        self.tokens = tokens
        self.cutoffs = cutoffs
        self.upstreams = upstreams
        self.routes = routes
        self.limits = limits
        self.realm = realm
        self.trustedProxies = trustedProxies
        self.log = log
        self.http2 = http2
        self.hsts = hsts
        self.eventLoops = eventLoops
        self.sessionCookieIssuers = sessionCookieIssuers
        self.sourcePath = sourcePath
    }

    /// Reads, parses and validates the configuration file at `path`.
    ///
    /// - Parameters:
    ///   - path: The file; relative paths inside it are resolved against its directory.
    ///   - checkFiles: Whether certificates, keys and other named files (and `hmac_env` variables) must exist.
    ///     `false` only for tooling that validates a configuration away from its deployment (and for tests).
    ///   - environment: The `TOKENGATE_…` overrides (``EnvironmentOverrides``); by default this process's, so that
    ///     `serve` and every reload apply the same ones.
    /// - Throws: ``ConfigurationError``, the first problem.
    public static func load(
        path: String,
        checkFiles: Bool = true,
        environment: EnvironmentOverrides = .fromProcess()
    ) throws -> GatewayConfiguration {
        let bytes = try self.readFile(path)
        let text = try self.decodeUTF8(bytes, file: path)
        return try GatewayConfiguration(yaml: text, sourcePath: path, checkFiles: checkFiles, environment: environment)
    }

    /// As ``load(path:checkFiles:environment:)``, but reports every problem the decoder finds in one run
    /// (`check-config`): each top-level section, route and upstream is judged on its own. A file that cannot be
    /// read or parsed as YAML is one problem.
    public static func loadReportingEveryProblem(
        path: String,
        checkFiles: Bool = true,
        environment: EnvironmentOverrides = .fromProcess()
    ) throws(ConfigurationProblems) -> GatewayConfiguration {
        let root: ConfigNode
        do {
            let bytes = try self.readFile(path)
            let text = try self.decodeUTF8(bytes, file: path)
            root = try self.rootNode(yaml: text, sourcePath: path, checkFiles: checkFiles, environment: environment)
        } catch {
            throw ConfigurationProblems(errors: [error])
        }
        var problems: [ConfigurationError] = []
        let configuration = ConfigurationDecoder().decode(root, problems: &problems)
        guard problems.isEmpty, let configuration else {
            throw ConfigurationProblems(errors: problems)
        }
        return configuration
    }

    /// Parses and validates configuration text. `sourcePath` names it in messages and anchors relative paths
    /// (its directory; the current directory when it has none).
    ///
    /// - Throws: ``ConfigurationError``.
    public init(
        yaml: String,
        sourcePath: String,
        checkFiles: Bool = true,
        environment: EnvironmentOverrides = .none
    ) throws {
        let root = try Self.rootNode(yaml: yaml, sourcePath: sourcePath, checkFiles: checkFiles, environment: environment)
        self = try ConfigurationDecoder().decode(root)
    }

    /// The text checked, parsed into a YAML tree and given the environment's overrides: what the decoder reads.
    fileprivate static func rootNode(
        yaml: String,
        sourcePath: String,
        checkFiles: Bool,
        environment: EnvironmentOverrides
    ) throws(ConfigurationError) -> ConfigNode {
        var yaml = yaml
        if yaml.unicodeScalars.first == "\u{FEFF}" {
            // A UTF-8 byte-order mark (editors on Windows add one). libyaml, told the encoding up front, would
            // read it as content; dropping it also keeps columns on the first line right.
            yaml = String(yaml.unicodeScalars.dropFirst())
        }
        let bytes = Array(yaml.utf8)
        guard bytes.count <= GatewayConfiguration.maximumFileSize else {
            throw ConfigurationError(
                code: .tooLarge,
                file: sourcePath,
                message: "the configuration is larger than \(GatewayConfiguration.maximumFileSize / 1024) KiB"
            )
        }
        guard bytes.contains(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) else {
            throw ConfigurationError(code: .empty, file: sourcePath, message: "the configuration is empty")
        }
        do {
            try YAMLPreflight.check(bytes)
        } catch {
            throw ConfigurationError(
                code: error.code,
                file: sourcePath,
                line: error.line,
                column: error.column,
                message: error.message
            )
        }
        let parsed: Node?
        do {
            parsed = try Yams.compose(yaml: yaml, .default, .default, .utf8)
        } catch let error as YamlError {
            throw GatewayConfiguration.translate(error, file: sourcePath)
        } catch {
            throw ConfigurationError(code: .syntax, file: sourcePath, message: "\(error)")
        }
        guard let parsed else {
            throw ConfigurationError(code: .empty, file: sourcePath, message: "the configuration is empty")
        }
        let (root, setBy) = try environment.apply(to: parsed, file: sourcePath)
        let context = DecodingContext(
            file: sourcePath,
            baseDirectory: GatewayConfiguration.baseDirectory(for: sourcePath),
            checkFiles: checkFiles,
            setByEnvironment: setBy
        )
        return ConfigNode(node: root, path: "", context: context)
    }
}

// MARK: Reading the file

extension GatewayConfiguration {
    /// Reads at most ``maximumFileSize`` + 1 bytes, so a huge (or endless, like `/dev/zero`) file costs nothing.
    fileprivate static func readFile(_ path: String) throws(ConfigurationError) -> [UInt8] {
        func failure(_ message: String) -> ConfigurationError {
            ConfigurationError(code: .io, file: path, message: message)
        }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let reason = errno == ENOENT ? "no such file" : String(cString: strerror(errno))
            throw failure("cannot open the configuration: \(reason)")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw failure("cannot stat the configuration: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT != S_IFDIR else {
            throw failure("the configuration path is a directory")
        }
        let limit = self.maximumFileSize + 1
        var bytes = [UInt8](repeating: 0, count: limit)
        var count = 0
        while count < limit {
            let result = bytes.withUnsafeMutableBytes { buffer in
                read(descriptor, buffer.baseAddress! + count, limit - count)
            }
            if result < 0 {
                if errno == EINTR {
                    continue
                }
                throw failure("cannot read the configuration: \(String(cString: strerror(errno)))")
            }
            if result == 0 {
                break
            }
            count += result
        }
        guard count <= self.maximumFileSize else {
            throw ConfigurationError(
                code: .tooLarge,
                file: path,
                message: "the configuration is larger than \(self.maximumFileSize / 1024) KiB"
            )
        }
        bytes.removeSubrange(count...)
        return bytes
    }

    /// Decodes strictly: the position of the first invalid byte is reported rather than silently replaced.
    static func decodeUTF8(_ bytes: [UInt8], file: String) throws(ConfigurationError) -> String {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        var offset = 0
        var line = 1
        var lineStart = 0
        loop: while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar):
                offset += UTF8.width(scalar)
                if scalar == "\n" {
                    line += 1
                    lineStart = offset
                }
            case .emptyInput:
                break loop
            case .error:
                throw ConfigurationError(
                    code: .encoding,
                    file: file,
                    line: line,
                    column: offset - lineStart + 1,
                    message: "the configuration is not valid UTF-8 (invalid byte at offset \(offset))"
                )
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The absolute directory of `sourcePath`, against which relative paths in the file are resolved.
    static func baseDirectory(for sourcePath: String) -> String {
        var directory: String
        if let slash = sourcePath.lastIndex(of: "/") {
            directory = String(sourcePath[..<slash])
            if directory.isEmpty {
                return "/"
            }
        } else {
            directory = ""
        }
        if directory.hasPrefix("/") {
            return directory
        }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else {
            return directory
        }
        let cwd = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if directory.isEmpty || directory == "." {
            return cwd
        }
        if directory.hasPrefix("./") {
            directory.removeFirst(2)
        }
        return cwd == "/" ? "/" + directory : cwd + "/" + directory
    }

    /// Maps Yams' errors to positioned configuration errors, without Yams' snippet of the offending line.
    fileprivate static func translate(_ error: YamlError, file: String) -> ConfigurationError {
        switch error {
        case .duplicatedKeysInMapping(let duplicates, let context):
            let names = duplicates.map { "'\($0)'" }.joined(separator: ", ")
            return ConfigurationError(
                code: .duplicate,
                file: file,
                line: context.mark.line,
                column: context.mark.column,
                message: "duplicate key \(names) in a mapping"
            )
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            return ConfigurationError(
                code: .syntax,
                file: file,
                line: mark.line,
                column: mark.column,
                message: problem
            )
        case .reader(let problem, _, _, _):
            return ConfigurationError(code: .syntax, file: file, message: problem)
        case .no, .memory, .writer, .emitter, .representer, .dataCouldNotBeDecoded:
            return ConfigurationError(code: .syntax, file: file, message: "the YAML could not be parsed")
        }
    }
}
