//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import TokengateTokens

/// `tokengate keygen`: a new signing key as a private JWK Set (for the token page that mints) and a
/// public one (for the gateway that verifies).
struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Generate a signing key: DIR/private.jwks (mode 0600) and DIR/public.jwks."
    )

    @Option(help: "The algorithm: HS256, HS384, HS512, EdDSA, ES256, RS256 or PS256.")
    var alg: String

    @Option(help: "The key id (kid). Defaults to a random id.")
    var kid: String?

    @Option(help: "The directory to write the two files into (created if missing).")
    var out: String

    @Flag(help: "Replace existing key files.")
    var force = false

    func run() throws {
        guard let algorithm = TokenAlgorithm(rawValue: self.alg) else {
            fail("unknown algorithm '\(self.alg)'; use one of \(TokenAlgorithm.allCases.map(\.rawValue).joined(separator: ", "))", status: .usage)
        }
        let keyID = self.kid ?? Self.randomKeyID()
        let privatePath = (self.out as NSString).appendingPathComponent("private.jwks")
        let publicPath = (self.out as NSString).appendingPathComponent("public.jwks")
        if !self.force, FileManager.default.fileExists(atPath: privatePath) || FileManager.default.fileExists(atPath: publicPath) {
            fail("'\(self.out)' already holds key files; pass --force to replace them", status: .cannotCreate)
        }
        let keys: (privateJWKS: String, publicJWKS: String)
        do {
            keys = try KeyGenerator.generate(algorithm: algorithm, keyID: keyID)
        } catch {
            fail("cannot generate a \(algorithm.rawValue) key: \(error)", status: .software)
        }
        do {
            try FileManager.default.createDirectory(atPath: self.out, withIntermediateDirectories: true)
            try FileOutput.write(keys.privateJWKS, to: privatePath, mode: 0o600)
            // An HMAC key is necessarily secret in both files; an asymmetric public set is not.
            let publicMode: mode_t = algorithm.rawValue.hasPrefix("HS") ? 0o600 : 0o644
            try FileOutput.write(keys.publicJWKS, to: publicPath, mode: publicMode)
        } catch let error as FileOutputError {
            fail("\(error)", status: .cannotCreate)
        } catch {
            fail("cannot create the directory '\(self.out)': \(error.localizedDescription)", status: .cannotCreate)
        }
        print("wrote \(privatePath) and \(publicPath) (\(algorithm.rawValue), kid \(keyID))")
    }

    static func randomKeyID() -> String {
        (0..<8).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }
}
