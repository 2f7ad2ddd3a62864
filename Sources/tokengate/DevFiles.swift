//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateConfig
import TokengateTLS
import TokengateTokens

/// The files `tokengate dev` generates on a first run, at the paths the configuration names: the first TLS
/// listener's first certificate and its key, the signing key's JWK Set and the verification JWK Set (and
/// the directory of a file or SQLite cutoff store, which the store then creates).
///
/// The paths come from the configuration (not from a directory of `dev`'s own), so a `--config` with other
/// paths gets its files where it will read them, and the banner's `curl` line names the certificate the
/// gateway really serves and a token signed by the key it really checks.
struct DevFiles {
    let certificate: ConfigPath
    let certificateKey: ConfigPath
    let privateJWKS: ConfigPath
    let publicJWKS: ConfigPath
    /// A file or SQLite cutoff store's file: its directory must exist.
    let cutoffFile: ConfigPath?

    /// Reads the paths from `configuration` (loaded without file checks: the files may not exist yet).
    ///
    /// - Throws: a message naming what the configuration lacks for `dev`.
    init(configuration: GatewayConfiguration) throws(DevSetupError) {
        guard let tls = configuration.listeners.lazy.compactMap(\.tls).first, let pair = tls.certificates.first else {
            throw DevSetupError("\(configuration.sourcePath): `dev` needs a TLS listener to generate its certificate for")
        }
        guard let signing = configuration.signingKey else {
            throw DevSetupError("\(configuration.sourcePath): `dev` needs a `signing_key` (a `jwks:` file) to mint its demo tokens")
        }
        guard case .jwks(let privateJWKS) = signing.source else {
            throw DevSetupError("\(configuration.sourcePath): `dev` generates its signing key as a JWK Set; `signing_key` must be a `jwks:` file")
        }
        let publicJWKS = configuration.keys.lazy.compactMap { key -> ConfigPath? in
            if case .jwks(let path) = key.source { return path }
            return nil
        }.first
        guard let publicJWKS else {
            throw DevSetupError("\(configuration.sourcePath): `dev` needs a `keys:` entry that is a `jwks:` file, for the public half of its signing key")
        }
        self.certificate = pair.cert
        self.certificateKey = pair.key
        self.privateJWKS = privateJWKS
        self.publicJWKS = publicJWKS
        switch configuration.cutoffs {
        case .file(let path), .sqlite(let path): self.cutoffFile = path
        case .postgres: self.cutoffFile = nil
        }
    }

    /// Creates the certificate and the key pair where they are missing; later runs reuse them (delete them to
    /// start over). A pair is generated together when either half is missing, so its halves always match.
    /// Private files are written with mode 0600.
    func prepare() throws {
        if let cutoffFile = self.cutoffFile {
            try Self.createDirectory(of: cutoffFile)
        }
        if !Self.exists(self.certificate) || !Self.exists(self.certificateKey) {
            let certificate = try SelfSignedCertificate.generate(hostnames: ["localhost", "127.0.0.1", "::1"], validityDays: 30)
            try Self.write(certificate.privateKeyPEM, to: self.certificateKey, mode: 0o600)
            try Self.write(certificate.certificatePEM, to: self.certificate, mode: 0o644)
            print("generated a self-signed dev certificate: \(Self.display(self.certificate))")
        }
        if !Self.exists(self.privateJWKS) || !Self.exists(self.publicJWKS) {
            let generated = try KeyGenerator.generate(algorithm: .edDSA, keyID: "dev-" + Keygen.randomKeyID())
            try Self.write(generated.privateJWKS, to: self.privateJWKS, mode: 0o600)
            try Self.write(generated.publicJWKS, to: self.publicJWKS, mode: 0o644)
            print("generated a dev signing key (EdDSA): \(Self.display(self.privateJWKS)), public half in \(Self.display(self.publicJWKS))")
        }
    }

    /// `path` as a user types it from the current directory: relative when it lies below it, absolute
    /// otherwise, with `..` and `.` taken out (the configuration's `../.dev/…` reads `.dev/…` from the
    /// repository).
    static func display(_ path: ConfigPath) -> String {
        let absolute = URL(fileURLWithPath: path.path).standardizedFileURL.path
        let current = URL(fileURLWithPath: FileManager.default.currentDirectoryPath).standardizedFileURL.path
        let prefix = current.hasSuffix("/") ? current : current + "/"
        return absolute.hasPrefix(prefix) ? String(absolute.dropFirst(prefix.count)) : absolute
    }

    private static func exists(_ path: ConfigPath) -> Bool {
        FileManager.default.fileExists(atPath: path.path)
    }

    private static func write(_ contents: String, to path: ConfigPath, mode: mode_t) throws {
        try Self.createDirectory(of: path)
        try FileOutput.write(contents, to: path.path, mode: mode)
    }

    private static func createDirectory(of path: ConfigPath) throws {
        let directory = URL(fileURLWithPath: path.path).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }
}

/// Why `tokengate dev` cannot run on a configuration.
struct DevSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
