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
    package convenience init(listener tls: TLSListenerConfiguration, alpnProtocols: [String]) throws {
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
