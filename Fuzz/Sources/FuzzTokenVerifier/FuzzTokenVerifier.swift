//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
import TokengateTokens

/// libFuzzer's entry point: the input is a token exactly as a client sends it (an `Authorization` value's token,
/// a cookie's value or a form field's value), checked against every fixture key set.
///
/// Besides not crashing, every entry point must agree: the String, Substring and raw-byte verifiers are three
/// ways into one parser, and a disagreement means one of them reads bytes the others do not.
@main
enum FuzzTokenVerifier {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzTokenVerifier(data, size) })
    }
}

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzTokenVerifier(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let text = String(decoding: bytes, as: UTF8.self)
    let validUTF8 = String(validating: bytes, as: UTF8.self) != nil
    for verifier in FuzzKeys.verifiers {
        let raw = verifier.verify(bytes, accept: .any, cutoffs: FuzzKeys.cutoffs, now: FuzzKeys.now)
        if case .valid = raw {
            // A fuzzer cannot forge a signature: a valid answer to random bytes is a verification bug, unless the
            // input is one of the fixture tokens themselves (the corpus holds them).
            guard FuzzKeys.fixtureTokens.contains(text) else {
                fatalError("random bytes verified as a token")
            }
        }
        // The String path sees the same bytes only when they are UTF-8 (otherwise U+FFFD replaced some).
        guard validUTF8 else { continue }
        let viaString = verifier.verify(text, accept: .any, cutoffs: FuzzKeys.cutoffs, now: FuzzKeys.now)
        let viaSubstring = verifier.verify(
            Substring(text),
            accept: .any,
            cutoffs: FuzzKeys.cutoffs,
            now: FuzzKeys.now
        )
        guard raw == viaString, raw == viaSubstring else {
            fatalError("the String, Substring and byte verifiers disagree: \(raw) \(viaString) \(viaSubstring)")
        }
    }
    return 0
}

/// The fixture key sets (Tests/TokengateTokensTests/Fixtures), found from this file's path, loaded once.
enum FuzzKeys {
    static let fixtures = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/TokengateTokensTests/Fixtures")

    /// The fixture file's own `now`, so that its valid tokens are valid here too.
    static let now: Int64 = {
        let object = try? JSONSerialization.jsonObject(with: Data(contentsOf: file("test-only-tokens.json")))
        return ((object as? [String: Any])?["now"] as? NSNumber)?.int64Value ?? 1_760_000_000
    }()

    static let fixtureTokens: Set<String> = {
        let object = try? JSONSerialization.jsonObject(with: Data(contentsOf: file("test-only-tokens.json")))
        let cases = (object as? [String: Any])?["cases"] as? [[String: Any]] ?? []
        return Set(cases.compactMap { $0["token"] as? String })
    }()

    static let verifiers: [TokenVerifier] = ["hs256", "hs384", "hs512", "es256", "rs256", "ps256", "eddsa"].map {
        name in
        guard let keys = try? KeySet.load(path: file("test-only-\(name)-public.jwks").path) else {
            fatalError("the fixture key set \(name) does not load")
        }
        return TokenVerifier(keys: keys, policy: VerificationPolicy(issuer: nil))
    }

    /// A few users with cutoffs, so that the revocation lookups run too.
    static let cutoffs = CutoffSnapshot(
        globalRevokedBefore: 1_000_000_000,
        users: [
            "alice": UserCutoffs(revokedBefore: now - 10),
            "user-hs256": UserCutoffs(apiRevokedBefore: now - 10),
        ]
    )

    static func file(_ name: String) -> URL { fixtures.appendingPathComponent(name) }
}
