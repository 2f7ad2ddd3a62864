//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// A PKCE code challenge with the `S256` method (RFC 7636 §4.2): `BASE64URL(SHA-256(code_verifier))`, 43
/// characters.
///
/// Only `S256` exists here: `plain` sends the verifier itself through the browser, which is exactly what PKCE
/// is there to keep out of the redirect an intercepting app can read (RFC 7636 §7.2). The challenge is kept
/// as its 32 decoded bytes; the text must be the one canonical base64url form of them (``Base64URL``), so a
/// challenge has one spelling and the code that seals it cannot be re-spelled.
public struct CodeChallenge: Sendable, Hashable {
    /// The length of an `S256` challenge: 32 bytes in unpadded base64url.
    public static let textLength = 43
    /// RFC 7636 §4.1: a verifier is 43 to 128 characters.
    public static let verifierLengths = 43...128

    /// The challenge as the app sent it.
    public let text: String
    private let digest: [UInt8]

    /// Nil unless `text` is 43 characters of canonical base64url (32 bytes).
    public init?(_ text: String) {
        guard text.utf8.count == Self.textLength, let digest = Base64URL.decode(text), digest.count == 32 else {
            return nil
        }
        self.text = text
        self.digest = digest
    }

    /// The challenge of `verifier` (what an app computes; tests and tools).
    public init(verifier: String) {
        let digest = Self.sha256(Array(verifier.utf8))
        self.text = Base64URL.encode(digest)
        self.digest = digest
    }

    /// Whether `verifier` is well-formed (``isValidVerifier(_:)``) and its SHA-256 is this challenge, compared in
    /// constant time (the digest is public once the code is, but the comparison costs nothing to make safe).
    public func isAnswered(by verifier: String) -> Bool {
        guard Self.isValidVerifier(verifier) else { return false }
        let computed = Self.sha256(Array(verifier.utf8))
        return computed.withUnsafeBytes { c in
            self.digest.withUnsafeBytes { d in
                CTokengateShims_equal_constant_time(c.baseAddress, d.baseAddress, 32) == 1
            }
        }
    }

    /// RFC 7636 §4.1: 43 to 128 characters of `A-Z a-z 0-9 - . _ ~`.
    public static func isValidVerifier(_ verifier: String) -> Bool {
        Self.verifierLengths.contains(verifier.utf8.count)
            && verifier.utf8.allSatisfy { byte in
                (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
                    || byte == UInt8(ascii: "~")
            }
    }

    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        bytes.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { CTokengateShims_sha256(input.baseAddress, input.count, $0.baseAddress) }
        }
        return out
    }
}
