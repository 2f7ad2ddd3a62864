//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import Foundation
import TokengateGateway
import TokengateHTTP
import TokengateTokens

/// `tokengate token mint|verify`.
struct TokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token",
        abstract: "Mint and verify tokens by hand.",
        subcommands: [Mint.self, Verify.self]
    )

    struct Mint: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Mint a token with a private JWK Set and print it.")

        @Option(help: "The private JWK Set (as written by `tokengate keygen`).")
        var key: String

        @Option(help: "The key id to sign with, when the set holds several keys.")
        var kid: String?

        @Option(help: "The user id (the `sub` claim).")
        var sub: String

        @Flag(name: .customLong("api-only"), help: "Mint an api token (api_only: true) instead of a session token.")
        var apiOnly = false

        @Option(help: "Issued-at, UNIX seconds (default: now).")
        var iat: Int64?

        @Option(help: "Expiry, UNIX seconds (optional).")
        var exp: Int64?

        func run() throws {
            let bytes = FileOutput.read(self.key, what: "private key set")
            let signer: TokenSigner
            do {
                signer = try TokenSigner(privateJWKS: bytes, keyID: self.kid)
            } catch {
                fail("invalid private key set '\(self.key)': \(error)", status: .dataError)
            }
            let claims = TokenClaims(
                subject: self.sub,
                issuedAt: self.iat ?? Int64(Date().timeIntervalSince1970),
                apiOnly: self.apiOnly,
                expiresAt: self.exp,
                notBefore: nil,
                issuer: nil,
                audience: nil
            )
            do {
                print(try signer.mint(claims))
            } catch {
                fail("cannot mint: \(error)", status: .usage)
            }
        }
    }

    struct Verify: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a token. Exit 0 and a JSON line when valid; exit 1 and the reason when not.",
            discussion: """
                Exit status: 0 valid; 1 invalid (malformed included; the JSON line gives the reason); 64 usage error; \
                65 a key or cutoffs file whose content is wrong; 66 a key or cutoffs file missing or unreadable.
                """
        )

        @Option(help: "A JWK Set or a PEM public key.")
        var keys: String

        @Option(help: "The algorithm for keys without their own alg (needed for an RSA or HMAC JWK without alg).")
        var alg: String?

        @Option(help: "A cutoffs JSON file.")
        var cutoffs: String?

        @Option(help: "Which kinds to accept: api, session or any.")
        var accept: String = "any"

        @Option(name: .customLong("session-max-age"), help: "Session token lifetime in seconds (default 14 days).")
        var sessionMaxAge: Int64?

        @Option(help: "The current time, UNIX seconds (default: now).")
        var now: Int64?

        @Argument(help: "The token.")
        var token: String

        func run() throws {
            let accepted: AcceptedKinds
            switch self.accept {
            case "api": accepted = .api
            case "session": accepted = .session
            case "any": accepted = .any
            default: fail("--accept must be api, session or any, not '\(self.accept)'", status: .usage)
            }
            var algorithm: TokenAlgorithm?
            if let name = self.alg {
                guard let parsed = TokenAlgorithm(rawValue: name) else {
                    fail(
                        "--alg must be one of \(TokenAlgorithm.allCases.map(\.rawValue).joined(separator: ", ")), "
                            + "not '\(name)'",
                        status: .usage
                    )
                }
                algorithm = parsed
            }
            let keySet: KeySet
            do {
                keySet = try KeySet.load(path: self.keys, algorithm: algorithm)
            } catch {
                fail("invalid key file '\(self.keys)': \(error)", status: Self.status(forInputFileError: error))
            }
            var snapshot = CutoffSnapshot.empty
            if let path = self.cutoffs {
                do {
                    snapshot = try CutoffSnapshot.load(jsonFile: path)
                } catch {
                    fail("invalid cutoffs file '\(path)': \(error)", status: Self.status(forInputFileError: error))
                }
            }
            var policy = VerificationPolicy()
            if let maxAge = self.sessionMaxAge {
                guard maxAge > 0 else { fail("--session-max-age must be positive", status: .usage) }
                policy.sessionMaxAge = maxAge
            }
            let verifier = TokenVerifier(keys: keySet, policy: policy)
            let now = self.now ?? Int64(Date().timeIntervalSince1970)
            switch verifier.verify(self.token, accept: accepted, cutoffs: snapshot, now: now) {
            case .valid(let token):
                let kid = token.keyID.map { JSONString.quote($0) } ?? "null"
                print(
                    "{\"sub\":\(JSONString.quote(token.subject)),\"kind\":\"\(token.kind.rawValue)\","
                        + "\"iat\":\(token.issuedAt),\"kid\":\(kid)}"
                )
            case .invalid(let reason):
                print("{\"error\":\"invalid_token\",\"reason\":\"\(reason.code)\"}")
                throw ExitCode(ExitStatus.invalidToken.rawValue)
            }
        }

        /// 66 for a key or cutoffs file that is missing or unreadable, 65 for one whose content is wrong.
        static func status(forInputFileError error: any Error) -> ExitStatus {
            let code = (error as? KeyLoadingError)?.code ?? (error as? CutoffFileError)?.code
            return code == "unreadable_file" ? .noInput : .dataError
        }
    }
}
