//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import Foundation
import TokengateTestSupport
import Testing

@testable import TokengateTokens

/// Interoperability with an independent implementation (scripts/fixtures/make_token_fixtures.py, Python
/// `cryptography`): its tokens verify here with the outcome it predicts, and our tokens verify there.
@Suite struct IndependentFixtureTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var alg: String
        var token: String
        var accept: String
        var expect: String
        var subject: String
        var jwks: String
        var pem: String?
        var cutoffs: CutoffSnapshot
        var testDescription: String { self.name }
    }

    static let manifest: (now: Int64, cases: [Case]) = {
        guard let root = try? TestSupport.json(TestSupport.fixtures.appendingPathComponent("test-only-tokens.json")),
            let now = (root["now"] as? NSNumber)?.int64Value,
            let raw = root["cases"] as? [[String: Any]]
        else { return (0, []) }
        let cases = raw.map { c -> Case in
            let cutoffJSON = try! JSONSerialization.data(withJSONObject: c["cutoffs"] ?? [:])
            return Case(
                name: c["name"] as! String,
                alg: c["alg"] as! String,
                token: c["token"] as! String,
                accept: c["accept"] as! String,
                expect: c["expect"] as! String,
                subject: c["subject"] as! String,
                jwks: c["jwks"] as! String,
                pem: c["pem"] as? String,
                cutoffs: try! CutoffSnapshot(json: [UInt8](cutoffJSON))
            )
        }
        return (now, cases)
    }()

    @Test func manifestCoversEveryAlgorithm() {
        let algorithms = Set(Self.manifest.cases.map(\.alg))
        #expect(algorithms == Set(TokenAlgorithm.allCases.map(\.rawValue)))
        #expect(Self.manifest.cases.count >= 7 * 25)
    }

    @Test(arguments: manifest.cases)
    func independentTokenHasPredictedOutcome(_ c: Case) throws {
        let accept: AcceptedKinds = c.accept == "api" ? .api : c.accept == "session" ? .session : .any
        var keySets = [try KeySet.load(path: TestSupport.fixtures.appendingPathComponent(c.jwks).path)]
        if let pem = c.pem {
            // The same public key as PEM, given the kid the tokens carry.
            let text = try String(contentsOf: TestSupport.fixtures.appendingPathComponent(pem), encoding: .utf8)
            let algorithm = try #require(TokenAlgorithm(rawValue: c.alg))
            keySets.append(try KeySet(pem: text, algorithm: algorithm, keyID: "test-only-\(c.alg.lowercased())"))
        }
        for keys in keySets {
            let result = TokenVerifier(keys: keys).verify(
                c.token,
                accept: accept,
                cutoffs: c.cutoffs,
                now: Self.manifest.now
            )
            if c.expect == "valid" {
                let token = try #require(result.token, "\(c.name): \(result)")
                #expect(token.subject == c.subject)
                #expect(token.keyID == "test-only-\(c.alg.lowercased())")
            } else {
                #expect(result.reason == c.expect, "\(c.name)")
            }
        }
    }

    // MARK: Our tokens, verified by the independent implementation

    static let python: (usable: Bool, why: String) = {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", "import cryptography"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
            process.waitUntilExit()
        } catch {
            return (false, "python3 cannot be started: \(error)")
        }
        return process.terminationStatus == 0 ? (true, "") : (false, "python3 has no 'cryptography' package")
    }()

    static func pythonVerify(jwksPath: String, token: String) throws -> (status: Int32, output: String) {
        let result = try ChildProcess.run(
            "/usr/bin/env",
            [
                "python3", TestSupport.packageRoot.appendingPathComponent("scripts/fixtures/make_token_fixtures.py").path,
                "verify", "--jwks", jwksPath, token,
            ]
        )
        return (result.status, result.stdout + result.stderr)
    }

    @Test(
        .enabled(if: IndependentFixtureTests.python.usable, "python3 with the cryptography package is missing"),
        arguments: TokenAlgorithm.allCases
    )
    func tokensMintedHereVerifyInPython(_ algorithm: TokenAlgorithm) throws {
        let keys = try KeyGenerator.generate(algorithm: algorithm, keyID: "interop-\(algorithm.rawValue)")
        let signer = try TokenSigner(privateJWKS: Array(keys.privateJWKS.utf8))
        let token = try signer.mint(
            TokenClaims(subject: "interop-user", issuedAt: 1_760_000_000, apiOnly: true, expiresAt: 1_790_000_000)
        )
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tokengate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let jwksPath = directory.appendingPathComponent("public.jwks").path
        try keys.publicJWKS.write(toFile: jwksPath, atomically: true, encoding: .utf8)

        let good = try Self.pythonVerify(jwksPath: jwksPath, token: token)
        #expect(good.status == 0, "python rejected our \(algorithm.rawValue) token: \(good.output)")
        #expect(good.output.contains("\"sub\": \"interop-user\""))
        #expect(good.output.contains("\"api_only\": true"))

        // And the check there is real: a changed signature fails.
        var chars = Array(token)
        chars[chars.count - 5] = chars[chars.count - 5] == "A" ? "B" : "A"
        let bad = try Self.pythonVerify(jwksPath: jwksPath, token: String(chars))
        #expect(bad.status == 1, "python accepted a changed \(algorithm.rawValue) signature")
    }
}
