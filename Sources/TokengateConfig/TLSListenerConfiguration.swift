//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// TLS settings of a listener (public or admin).
public struct TLSListenerConfiguration: Sendable, Equatable {
    /// At least one. The first is the default certificate, sent to clients that send no SNI or an unknown name.
    public var certificates: [CertificateConfiguration]
    /// How long a client may take to finish the handshake. Default 10s.
    public var handshakeTimeout: Duration
    /// The lowest protocol version accepted. Default TLS 1.2; TLS 1.3 is always accepted.
    public var minimumVersion: TLSProtocolVersion

    public init(
        certificates: [CertificateConfiguration],
        handshakeTimeout: Duration = .seconds(10),
        minimumVersion: TLSProtocolVersion = .tls12
    ) {
        self.certificates = certificates
        self.handshakeTimeout = handshakeTimeout
        self.minimumVersion = minimumVersion
    }
}

/// A certificate chain and its private key, both PEM files. Only their existence is checked at load.
public struct CertificateConfiguration: Sendable, Equatable {
    public var cert: ConfigPath
    public var key: ConfigPath
    /// SNI names this certificate answers for (lower-cased). Empty: the names in the certificate itself.
    public var serverNames: [String]

    public init(cert: ConfigPath, key: ConfigPath, serverNames: [String] = []) {
        self.cert = cert
        self.key = key
        self.serverNames = serverNames
    }
}

/// A TLS protocol version floor. TLS 1.0 and 1.1 cannot be configured.
public enum TLSProtocolVersion: String, Sendable, Equatable, CaseIterable {
    case tls12 = "1.2"
    case tls13 = "1.3"
}
