//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
@testable import TokengateTokens

/// libFuzzer's entry point: the input is a token's header JSON, a newline, and its payload JSON. The harness
/// encodes and signs them with the fixture HS256 key, so that the fuzzer reaches what random bytes never do: the
/// header's `alg`/`kid` reading after the signature, and every claim check (JSON scanning, types, NumericDates,
/// user IDs, cutoffs, kinds).
///
/// Besides not crashing: a token the verifier accepts must be one Foundation's JSON parser also reads as an object
/// whose user claim is the verified subject and whose `iat` is the verified issue time. A disagreement means the
/// in-place scanner read a claim set differently from a standard parser (duplicate names, escapes, numbers).
@main
enum FuzzTokenClaims {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzTokenClaims(data, size) })
    }
}

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzTokenClaims(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let split = bytes.firstIndex(of: 0x0A) ?? bytes.count
    let header = Array(bytes[0..<split])
    let payload = split < bytes.count ? Array(bytes[(split + 1)...]) : []
    let input = Base64URL.encode(header) + "." + Base64URL.encode(payload)
    let token = input + "." + Base64URL.encode(FuzzSigner.mac.hmacTag(Array(input.utf8))!)
    let result = FuzzSigner.verifier.verify(token, accept: .any, cutoffs: FuzzSigner.cutoffs, now: FuzzSigner.now)
    guard case .valid(let verified) = result else { return 0 }
    guard let claims = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any] else {
        fatalError("a verified payload is not a JSON object to Foundation")
    }
    guard (claims["sub"] as? String) == verified.subject else {
        fatalError("the verified subject differs from Foundation's reading of the payload")
    }
    guard let issuedAt = claims["iat"] as? NSNumber, issuedAt.int64Value == verified.issuedAt else {
        fatalError("the verified iat differs from Foundation's reading of the payload")
    }
    return 0
}

/// The fixture HS256 key (Tests/TokengateTokensTests/Fixtures), found from this file's path, loaded once.
enum FuzzSigner {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/TokengateTokensTests/Fixtures")

    /// Bytes, not `Data`: LeakSanitizer cannot follow the pointer inside a `Data` held by a global (Swift keeps
    /// enum tags in the pointer's spare bits) and would report it as a leak at exit.
    static let jwks: [UInt8] = {
        guard let data = try? Data(contentsOf: fixtures.appendingPathComponent("test-only-hs256-public.jwks")) else {
            fatalError("the fixture HS256 key set cannot be read")
        }
        return Array(data)
    }()

    static let mac: SignatureCheck = {
        let object = try? JSONSerialization.jsonObject(with: Data(jwks))
        let key = ((object as? [String: Any])?["keys"] as? [[String: Any]])?.first
        guard let k = key?["k"] as? String, let secret = Base64URL.decode(k),
            let mac = SignatureCheck(hmacBits: 256, secret: secret)
        else { fatalError("the fixture HS256 key set holds no usable secret") }
        return mac
    }()

    static let verifier: TokenVerifier = {
        guard let keys = try? KeySet(jwks: jwks) else { fatalError("the fixture HS256 key set does not load") }
        return TokenVerifier(keys: keys)
    }()

    static let now: Int64 = 1_760_000_000

    /// A few users with cutoffs, so that the revocation lookups run too.
    static let cutoffs = CutoffSnapshot(
        globalRevokedBefore: 1_000_000_000,
        users: [
            "alice": UserCutoffs(revokedBefore: now - 10),
            "user-hs256": UserCutoffs(apiRevokedBefore: now - 10),
        ]
    )
}
