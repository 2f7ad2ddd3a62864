//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Where one server certificate lives: a PEM certificate file (the leaf first, then any intermediates)
/// and a PEM private key file (unencrypted; PKCS#8, SEC1 EC or PKCS#1 RSA), and the SNI names it answers for.
public struct TLSCertificateSource: Sendable, Hashable {
    public var certificatePath: String
    public var privateKeyPath: String
    /// The SNI names (exact, or `*.domain` for one extra label) that select this certificate
    /// (`listen[].tls.certificates[].server_names`). Empty: the DNS subjectAltNames in the certificate itself.
    /// Configured names replace the certificate's: an operator who lists names means exactly those.
    public var serverNames: [String]

    public init(certificatePath: String, privateKeyPath: String, serverNames: [String] = []) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.serverNames = serverNames
    }
}
