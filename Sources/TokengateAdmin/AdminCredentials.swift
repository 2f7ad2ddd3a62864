//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import TokengateConfig
import TokengateGateway
import TokengateHTTP
import TokengateTLS

/// The admin listener's secret and TLS certificates, read from their files at start and again on every
/// reload, so that rotating a leaked admin secret or renewing the admin certificate takes `systemctl reload`
/// (or SIGHUP, or `POST /admin/reload`), like the public certificates. Before, both were read once: a reload
/// said "reloaded" and the old secret kept working.
///
/// The `admin` section itself cannot change on reload (``GatewayConfiguration/restartOnlyChanges(comparedTo:)``):
/// only the contents of the files it names. A request reads the secret in force when it arrives, a
/// connection the certificates in force when it is accepted.
public final class AdminCredentials: Sendable {
    public struct Files: Sendable {
        public var secret: [UInt8]?
        public var tls: TLSServerContext?

        public init(secret: [UInt8]?, tls: TLSServerContext?) {
            self.secret = secret
            self.tls = tls
        }
    }

    private let current: NIOLockedValueBox<Files>
    /// The `admin` section the files are read from again on reload; `nil` for credentials given as they are.
    private let configuration: AdminConfiguration?

    public init(_ files: Files) {
        self.current = NIOLockedValueBox(files)
        self.configuration = nil
    }

    /// Reads the files `configuration` names (``read(_:)``), and remembers the section for ``readAgain()``.
    public init(reading configuration: AdminConfiguration) throws {
        self.current = NIOLockedValueBox(try Self.read(configuration))
        self.configuration = configuration
    }

    /// Reads `admin.secret_file` and loads `admin.tls`, or throws naming what is wrong.
    package static func read(_ configuration: AdminConfiguration) throws -> Files {
        let secret = try configuration.secretFile.map { try AdminServer.loadSecret($0) }
        // A certificate that cannot be loaded is reported under its setting (`admin.tls.certificates[0].key: …`).
        return Files(secret: secret, tls: try configuration.tls.map { try AdminServer.makeTLSContext($0) })
    }

    /// The files as they are now, for a reload. Nothing is replaced here: a reload reads first and swaps
    /// (``replace(with:)``) only once everything else has loaded too.
    public func readAgain() throws -> Files {
        guard let configuration = self.configuration else { return self.files }
        return try Self.read(configuration)
    }

    public var files: Files { self.current.withLockedValue { $0 } }

    public func replace(with files: Files) {
        self.current.withLockedValue { $0 = files }
    }
}
