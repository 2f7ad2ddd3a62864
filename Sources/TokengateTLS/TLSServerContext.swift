//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims

/// Server-side TLS configuration: one `SSL_CTX` per certificate, SNI selection between them, and ALPN.
///
/// ### Certificates and SNI
/// Each ``TLSCertificateSource`` gets its own `SSL_CTX` with the same policy (``TLSPolicy``). Connections start
/// on the first one, which is the default for clients that send no SNI or an unknown name. A server-name
/// callback on every context matches the client's SNI against each certificate's configured server names
/// (``TLSCertificateSource/serverNames``), or its DNS subjectAltNames when none are configured
/// (``TLSServerNameMatcher``), and moves the connection with `SSL_set_SSL_CTX`. Session tickets are encrypted
/// with the first context's keys (OpenSSL keeps the original context as the session context).
///
/// ### ALPN
/// The server picks by *its own* preference among what the client offered. When nothing overlaps:
/// - if the list contains `http/1.1`, the handshake continues without ALPN and the connection is treated as
///   HTTP/1.1 (old clients and tools that send odd lists keep working);
/// - otherwise (e.g. `["h2"]` only) the handshake fails with `no_application_protocol` (RFC 7301 §3.2).
/// An empty list disables ALPN.
///
/// ### Sendable
/// `@unchecked Sendable` because it stores `OpaquePointer`s. This is safe: every `SSL_CTX` is fully configured
/// in `init` and never mutated afterwards, and OpenSSL documents `SSL_new` (and the internally locked session
/// cache and reference counts) as safe to use from many threads on a context that is no longer being
/// configured. The callback argument structures are immutable after `init` as well.
public final class TLSServerContext: @unchecked Sendable {
    /// One configured `SSL_CTX` per certificate; index 0 is the default.
    let contexts: [OpaquePointer]
    private let matcher: TLSServerNameMatcher
    private let alpnConfiguration: OpaquePointer?
    private let names: [[String]]
    /// What each certificate covers, for requests on its connections (``certificateNames(forServerName:)``).
    private let covered: [TLSCertificateNames]

    /// The ALPN preference list this context was built with.
    public let alpnProtocols: [String]
    /// The oldest protocol version accepted; every context of the set has the same floor, so SNI cannot
    /// move a connection to a weaker one.
    public let minimumVersion: TLSMinimumVersion
    /// Non-fatal findings from loading (for example an expired certificate); they were also logged.
    public let warnings: [TLSError]
    /// Each certificate's leaf `notAfter` in seconds since the epoch, in configuration order (`nil` where
    /// OpenSSL could not convert it): the expiry metric of the certificates the listener really serves.
    public let certificateExpiries: [Int64?]

    /// The DNS subjectAltNames of each certificate, in configuration order.
    public var serverNames: [[String]] {
        self.names
    }

    /// How many certificates the context chooses between by SNI.
    public var certificateCount: Int {
        self.contexts.count
    }

    /// The names the certificate a client gets for `serverName` covers: the certificate its SNI selects, the
    /// default (first) one for no SNI (`nil`) or an unknown name. The same choice as the handshake's
    /// server-name callback, which reads the same SNI with the same matcher, so it is the certificate the
    /// connection was given.
    public func certificateNames(forServerName serverName: String?) -> TLSCertificateNames {
        let index = serverName.flatMap { self.matcher.certificateIndex(for: $0) } ?? 0
        return self.covered[index]
    }

    /// Loads `certificates` (the first is the default), prepares ALPN and sets `minimumVersion` as the floor.
    ///
    /// - Throws: ``TLSError`` naming the file and what is wrong with it: ``TLSError/Code/fileUnreadable``,
    ///   ``TLSError/Code/notPEM``, ``TLSError/Code/invalidCertificate``, ``TLSError/Code/invalidPrivateKey``,
    ///   ``TLSError/Code/keyMismatch``, or ``TLSError/Code/invalidConfiguration``. An expired certificate only
    ///   warns (in ``warnings``, for the caller to report), so a renewal failure does not take the listener down.
    ///   Each error and warning says which certificate and file it is about (``TLSError/file``).
    public init(
        certificates: [TLSCertificateSource],
        alpnProtocols: [String],
        minimumVersion: TLSMinimumVersion = .tls12
    ) throws {
        guard !certificates.isEmpty else {
            throw TLSError(code: .invalidConfiguration, message: "a TLS listener needs at least one certificate")
        }
        let wire = try TLSPolicy.alpnWireFormat(alpnProtocols)

        var contexts: [OpaquePointer] = []
        var names: [[String]] = []
        var selectingNames: [[String]] = []
        var covered: [TLSCertificateNames] = []
        var warnings: [TLSError] = []
        var expiries: [Int64?] = []
        var alpnConfiguration: OpaquePointer? = nil
        do {
            if !wire.isEmpty {
                let continues: Int32 = alpnProtocols.contains("http/1.1") ? 1 : 0
                alpnConfiguration = wire.withUnsafeBufferPointer {
                    CTokengateShims_alpn_server_config_new($0.baseAddress, $0.count, continues)
                }
                guard alpnConfiguration != nil else {
                    throw TLSError(code: .internalError, message: "out of memory for the ALPN list")
                }
            }
            for (index, source) in certificates.enumerated() {
                let context = try TLSPolicy.makeContext(server: true, minimumVersion: minimumVersion)
                contexts.append(context)
                let loaded: LoadedCertificate
                do {
                    loaded = try Self.load(source, into: context)
                } catch {
                    throw error.about(Self.file(of: error, loading: source, index: index))
                }
                names.append(loaded.dnsNames)
                expiries.append(loaded.notAfter)
                selectingNames.append(source.serverNames.isEmpty ? loaded.dnsNames : source.serverNames)
                // What a client can have validated (the subject CN only without DNS names, as clients fall
                // back), and what the operator assigned to the certificate.
                let ownNames = loaded.dnsNames.isEmpty ? loaded.commonName.map { [$0] } ?? [] : loaded.dnsNames
                covered.append(TLSCertificateNames(ownNames + source.serverNames))
                warnings += loaded.warnings.map { $0.about(TLSError.CertificateFile(index: index, isPrivateKey: false)) }
                if let alpnConfiguration {
                    CTokengateShims_SSL_CTX_set_alpn_server(context, alpnConfiguration)
                }
            }
        } catch {
            contexts.forEach { SSL_CTX_free($0) }
            CTokengateShims_alpn_server_config_free(alpnConfiguration)
            throw error
        }

        self.contexts = contexts
        self.matcher = TLSServerNameMatcher(serverNames: selectingNames)
        self.alpnConfiguration = alpnConfiguration
        self.names = names
        self.covered = covered
        self.alpnProtocols = alpnProtocols
        self.minimumVersion = minimumVersion
        self.warnings = warnings
        self.certificateExpiries = expiries
        // The callback argument is `self` unretained: `self` owns the contexts, and every connection's
        // TLSHandler holds `self` strongly, so the pointer outlives every SSL that can call back.
        if contexts.count > 1 {
            let argument = Unmanaged.passUnretained(self).toOpaque()
            for context in contexts {
                CTokengateShims_SSL_CTX_set_tlsext_servername_callback(context, tokengateServerNameCallback, argument)
            }
        }
    }

    /// Which file of `source` (the `index`th certificate) `error` from loading it is about: the key for a key
    /// that is unreadable, unparseable or not the certificate's, the certificate (chain) file otherwise.
    static func file(of error: TLSError, loading source: TLSCertificateSource, index: Int) -> TLSError.CertificateFile {
        let isPrivateKey: Bool
        switch error.code {
        case .keyMismatch, .invalidPrivateKey:
            isPrivateKey = true
        case .fileUnreadable, .notPEM:
            // Said of one path: the key's when the message names it and the certificate is another file.
            isPrivateKey = source.privateKeyPath != source.certificatePath && error.message.contains(source.privateKeyPath)
                && !error.message.contains(source.certificatePath)
        default:
            isPrivateKey = false
        }
        return TLSError.CertificateFile(index: index, isPrivateKey: isPrivateKey)
    }

    deinit {
        self.contexts.forEach { SSL_CTX_free($0) }
        CTokengateShims_alpn_server_config_free(self.alpnConfiguration)
    }

    /// The context that should serve `serverName`, or `nil` to stay on the default.
    fileprivate func context(forServerName serverName: String) -> OpaquePointer? {
        guard let index = self.matcher.certificateIndex(for: serverName), index != 0 else {
            return nil
        }
        return self.contexts[index]
    }
}

/// OpenSSL's server-name callback (runs inside `SSL_do_handshake`, on the connection's event loop).
/// It only switches the certificate; it never fails the handshake, so unknown names get the default.
private func tokengateServerNameCallback(
    _ ssl: OpaquePointer?,
    _ alert: UnsafeMutablePointer<Int32>?,
    _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    guard let ssl, let argument, let name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name) else {
        return SSL_TLSEXT_ERR_OK
    }
    let serverContext = Unmanaged<TLSServerContext>.fromOpaque(argument).takeUnretainedValue()
    if let context = serverContext.context(forServerName: String(cString: name)) {
        _ = SSL_set_SSL_CTX(ssl, context)
    }
    return SSL_TLSEXT_ERR_OK
}
