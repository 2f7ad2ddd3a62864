//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Where one server certificate lives: a PEM certificate file (the leaf first, then any intermediates)
/// and a PEM private key file (unencrypted; PKCS#8, SEC1 EC or PKCS#1 RSA).
public struct TLSCertificateSource: Sendable, Hashable {
    public var certificatePath: String
    public var privateKeyPath: String

    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }
}
