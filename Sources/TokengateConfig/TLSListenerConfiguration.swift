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
    /// What a public listener with more than one certificate does with a request whose host its connection's
    /// certificate does not cover. Default `refuse` (421). Not read on the admin listener, which does not
    /// accept the key.
    public var misdirectedRequests: MisdirectedRequests
    /// `misdirected_requests` was written in the configuration (rather than left to its default): on a listener
    /// with one certificate it does nothing, which ``GatewayConfiguration/warnings`` says.
    public var misdirectedRequestsIsSet: Bool

    public init(
        certificates: [CertificateConfiguration],
        handshakeTimeout: Duration = .seconds(10),
        minimumVersion: TLSProtocolVersion = .tls12,
        misdirectedRequests: MisdirectedRequests = .refuse,
        misdirectedRequestsIsSet: Bool = false
    ) {
        self.certificates = certificates
        self.handshakeTimeout = handshakeTimeout
        self.minimumVersion = minimumVersion
        self.misdirectedRequests = misdirectedRequests
        self.misdirectedRequestsIsSet = misdirectedRequestsIsSet
    }
}

/// `listen[].tls.misdirected_requests`: a request on a connection whose certificate does not cover the
/// request's host (RFC 9110 §15.5.20).
public enum MisdirectedRequests: String, Sendable, Equatable, CaseIterable {
    /// Answered `421 Misdirected Request`, never routed: a connection validated for one name carries no
    /// requests for another.
    case refuse
    /// Routed by its host as any other request, whatever certificate its connection got.
    case allow
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
