//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// An error from TokengateTLS: a stable ``Code`` plus a human-readable message.
///
/// A struct rather than a public enum so that new codes can be added without breaking callers that switch
/// over them (see STYLE §2). Equality and hashing look at the code only, so
/// `error == TLSError.handshakeTimeout(...)`-style checks are written as `error.code == .handshakeTimeout`.
///
/// Messages never contain key material, passwords or token bytes: they are built from file paths, OpenSSL
/// reason strings (`ERR_reason_error_string`) and TLS alert names only.
public struct TLSError: Error, Hashable, CustomStringConvertible, Sendable {
    /// The stable, machine-readable part of a ``TLSError``.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case fileUnreadable
            case notPEM
            case invalidCertificate
            case invalidPrivateKey
            case keyMismatch
            case certificateExpired
            case invalidConfiguration
            case handshakeFailed
            case handshakeTimeout
            case uncleanShutdown
            case readFailed
            case writeFailed
            case certificateGenerationFailed
            case internalError
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// A certificate or key file could not be opened or read, or is too large.
        public static let fileUnreadable = Code(.fileUnreadable)
        /// A certificate or key file holds no PEM block (DER is not accepted).
        public static let notPEM = Code(.notPEM)
        /// A PEM certificate block could not be parsed.
        public static let invalidCertificate = Code(.invalidCertificate)
        /// A PEM private key could not be parsed (including encrypted keys, which are not supported).
        public static let invalidPrivateKey = Code(.invalidPrivateKey)
        /// The private key does not belong to the certificate.
        public static let keyMismatch = Code(.keyMismatch)
        /// The certificate is outside its validity period. A warning only: the context still loads.
        public static let certificateExpired = Code(.certificateExpired)
        /// The TLS configuration itself is not usable (no certificates, bad ALPN name, trust roots…).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// The TLS handshake failed (bad bytes, no shared version or cipher, verification failure…).
        public static let handshakeFailed = Code(.handshakeFailed)
        /// The peer did not complete the handshake in time.
        public static let handshakeTimeout = Code(.handshakeTimeout)
        /// The connection ended without the peer's close_notify.
        public static let uncleanShutdown = Code(.uncleanShutdown)
        /// Decrypting received records failed (a fatal alert or a corrupt record).
        public static let readFailed = Code(.readFailed)
        /// Encrypting outgoing data failed.
        public static let writeFailed = Code(.writeFailed)
        /// ``SelfSignedCertificate`` could not build a certificate.
        public static let certificateGenerationFailed = Code(.certificateGenerationFailed)
        /// OpenSSL failed in a way that is not the peer's fault (usually out of memory).
        public static let internalError = Code(.internalError)

        public var description: String {
            self.base.rawValue
        }
    }

    /// Holds the message out of line so that `TLSError` stays one word wide in existentials.
    private final class Backing: Sendable {
        let message: String
        let file: CertificateFile?

        init(message: String, file: CertificateFile?) {
            self.message = message
            self.file = file
        }
    }

    /// Which file of a ``TLSServerContext``'s certificates an error or warning is about, so that a caller that
    /// knows where the certificates were configured can name the setting (`certificates[1].key`).
    public struct CertificateFile: Hashable, Sendable {
        /// The position in the `certificates` the context was made from.
        public let index: Int
        /// The private key file rather than the certificate (chain) file.
        public let isPrivateKey: Bool

        public init(index: Int, isPrivateKey: Bool) {
            self.index = index
            self.isPrivateKey = isPrivateKey
        }
    }

    /// What kind of error this is.
    public let code: Code
    private let backing: Backing

    /// What went wrong, for logs: names the file or the OpenSSL reason, never secret material.
    public var message: String {
        self.backing.message
    }

    /// The certificate file this is about, when it came from loading one (``TLSServerContext``).
    public var file: CertificateFile? {
        self.backing.file
    }

    public init(code: Code, message: String, file: CertificateFile? = nil) {
        self.code = code
        self.backing = Backing(message: message, file: file)
    }

    /// The same error, said to be about `file`.
    func about(_ file: CertificateFile) -> TLSError {
        TLSError(code: self.code, message: self.message, file: file)
    }

    public var description: String {
        "TLSError.\(self.code): \(self.message)"
    }

    public static func == (lhs: TLSError, rhs: TLSError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
    }
}
