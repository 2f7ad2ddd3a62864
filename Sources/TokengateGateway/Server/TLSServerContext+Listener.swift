//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateTLS
import TokengateHTTP

extension TLSServerContext {
    /// The context for a listener's `tls:` section (public or admin): every certificate with its configured
    /// `server_names`, and `min_version` as the protocol floor. One place, so no key of the section can be
    /// read by one listener kind and dropped by the other.
    ///
    /// - Parameter key: where the section is in the configuration (`listen[0].tls`, `admin.tls`): a certificate
    ///   that cannot be loaded is reported under its own setting (`listen[0].tls.certificates[1].key: …`), like
    ///   every other configuration problem.
    /// - Throws: ``GatewayStartupError``, naming the setting.
    package convenience init(listener tls: TLSListenerConfiguration, key: String, alpnProtocols: [String]) throws {
        do {
            try self.init(
                certificates: tls.certificates.map {
                    TLSCertificateSource(
                        certificatePath: $0.cert.path,
                        privateKeyPath: $0.key.path,
                        serverNames: $0.serverNames
                    )
                },
                alpnProtocols: alpnProtocols,
                minimumVersion: TLSMinimumVersion(tls.minimumVersion)
            )
        } catch let error as TLSError {
            throw GatewayStartupError(Self.describe(error, in: key))
        }
    }

    /// `error` (or a warning) about a certificate of the section at `key`, under the setting it is about.
    package static func describe(_ error: TLSError, in key: String) -> String {
        guard let file = error.file else { return "\(key): \(error.message)" }
        return "\(key).certificates[\(file.index)].\(file.isPrivateKey ? "key" : "cert"): \(error.message)"
    }

    /// The warnings of the certificates of the section at `key` (expired, not valid yet), each under its setting;
    /// none when they cannot be loaded (that is an error, reported by the start or the check).
    package static func warnings(listener tls: TLSListenerConfiguration, key: String) -> [String] {
        guard let context = try? TLSServerContext(listener: tls, key: key, alpnProtocols: ["http/1.1"]) else { return [] }
        return context.warnings.map { Self.describe($0, in: key) }
    }
}

extension TLSMinimumVersion {
    package init(_ version: TLSProtocolVersion) {
        switch version {
        case .tls12: self = .tls12
        case .tls13: self = .tls13
        }
    }
}
