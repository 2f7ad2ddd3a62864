//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengateShims

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Client-side TLS configuration for `https://` upstreams: the same policy as the server (``TLSPolicy``), the
/// trust roots, peer verification and the ALPN list to offer.
///
/// With `verifyPeer`, the chain is verified against the trust roots and, per connection, the certificate must
/// match the `serverHostname` given to ``TLSHandler`` (DNS name or IP literal). Without a host name only the
/// chain is verified, so callers should always pass one.
///
/// With a `clientCertificate`, the chain and key are presented to a server that asks for a certificate (mutual
/// TLS), so that a backend can accept the gateway and nobody else. They are loaded as a listener's are
/// (``TLSServerContext/load(_:into:)``): a file that does not read or parse, or a key that is not the
/// certificate's, fails `init` with a ``TLSError`` whose ``TLSError/file`` says which of the two it is.
///
/// `@unchecked Sendable` because it stores an `OpaquePointer`: the `SSL_CTX` is fully configured in `init` and
/// never mutated afterwards, and `SSL_new` on such a context is thread-safe.
public final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer
    /// Whether connections verify the server's certificate and host name.
    public let verifyPeer: Bool
    /// The ALPN protocols offered, in preference order.
    public let alpnProtocols: [String]
    /// The client certificate's `notAfter` (UNIX seconds); `nil` without one or when OpenSSL cannot convert it.
    public let clientCertificateNotAfter: Int64?

    /// - Parameters:
    ///   - trustRootsPath: a PEM bundle file or a hashed certificate directory; `nil` uses OpenSSL's default
    ///     verify paths (the system store).
    ///   - verifyPeer: verify the chain and host name (turn off only for tests or explicit operator choice).
    ///   - alpnProtocols: offered in this order; empty sends no ALPN.
    ///   - clientCertificate: the certificate chain and key to present when the server asks; `nil` presents none.
    ///     Its ``TLSCertificateSource/serverNames`` are not used.
    public init(
        trustRootsPath: String?,
        verifyPeer: Bool = true,
        alpnProtocols: [String] = ["http/1.1"],
        clientCertificate: TLSCertificateSource? = nil
    ) throws {
        let wire = try TLSPolicy.alpnWireFormat(alpnProtocols)
        let context = try TLSPolicy.makeContext(server: false)
        do {
            ERR_clear_error()
            if let trustRootsPath {
                var info = stat()
                guard stat(trustRootsPath, &info) == 0 else {
                    throw TLSError(
                        code: .fileUnreadable,
                        message: "cannot read trust roots \(trustRootsPath): \(String(cString: strerror(errno)))"
                    )
                }
                let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
                let loaded =
                    isDirectory
                    ? SSL_CTX_load_verify_locations(context, nil, trustRootsPath)
                    : SSL_CTX_load_verify_locations(context, trustRootsPath, nil)
                guard loaded == 1 else {
                    let reason = OpenSSLErrorQueue.drainReasons(fallback: "no certificates found")
                    throw TLSError(code: .invalidConfiguration, message: "trust roots \(trustRootsPath): \(reason)")
                }
            } else {
                guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                    let reason = OpenSSLErrorQueue.drainReasons(fallback: "unknown reason")
                    throw TLSError(code: .invalidConfiguration, message: "system trust roots: \(reason)")
                }
            }
            if let clientCertificate {
                do {
                    self.clientCertificateNotAfter = try TLSServerContext.load(clientCertificate, into: context).notAfter
                } catch {
                    throw error.about(TLSServerContext.file(of: error, loading: clientCertificate, index: 0))
                }
            } else {
                self.clientCertificateNotAfter = nil
            }
            SSL_CTX_set_verify(context, verifyPeer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
            if !wire.isEmpty {
                // Unlike most of OpenSSL, SSL_CTX_set_alpn_protos returns 0 on success.
                let failed = wire.withUnsafeBufferPointer {
                    SSL_CTX_set_alpn_protos(context, $0.baseAddress, UInt32($0.count))
                }
                guard failed == 0 else {
                    throw TLSError(code: .internalError, message: "SSL_CTX_set_alpn_protos failed")
                }
            }
        } catch {
            SSL_CTX_free(context)
            throw error
        }
        self.context = context
        self.verifyPeer = verifyPeer
        self.alpnProtocols = alpnProtocols
    }

    deinit {
        SSL_CTX_free(self.context)
    }
}
