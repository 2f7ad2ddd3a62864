//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengatePercentEncoding

/// A PKCE (RFC 7636) code verifier and its `S256` challenge, for one login.
///
/// Make a fresh one for each token page visit (``random()``), send its ``challenge`` in the page URL
/// (``TokenPageURL/init(site:path:app:state:pkce:)``), keep the verifier in memory only, and send it with the
/// code from the callback (``CodeRedemption/request(site:path:app:code:verifier:)``). Another app that
/// claimed your callback scheme sees the code, never the verifier, so it cannot redeem the code.
///
/// Its `description` and mirror never show the verifier.
public struct PKCEVerifier: Sendable, Hashable {
    /// 43 to 128 characters of `A-Z a-z 0-9 - . _ ~`.
    public let verifier: String
    /// `BASE64URL(SHA-256(verifier))`, 43 characters.
    public let challenge: String
    /// The only method tokengate accepts.
    public static let method = "S256"

    /// - Throws: ``TokengateClientError`` `invalidURL` unless `verifier` is 43 to 128 characters of
    ///   `A-Z a-z 0-9 - . _ ~` (RFC 7636 §4.1).
    public init(verifier: String) throws {
        guard (43...128).contains(verifier.utf8.count), verifier.utf8.allSatisfy(PercentEncoding.isUnreserved) else {
            throw TokengateClientError(.invalidURL, "a code verifier is 43 to 128 characters of A-Z a-z 0-9 - . _ ~")
        }
        self.verifier = verifier
        self.challenge = Self.base64URL(SHA256.hash(Array(verifier.utf8)))
    }

    /// 32 bytes from the system's secure random source in base64url: 43 characters, 256 bits (RFC 7636 §4.1's
    /// recommendation). `SystemRandomNumberGenerator` is the same source ``TokenPageURL/randomState()`` uses
    /// (`arc4random_buf` on Apple platforms, `getrandom` on Linux).
    public static func random() -> PKCEVerifier {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        // 43 characters of base64url are always a valid verifier.
        return try! PKCEVerifier(verifier: Self.base64URL(bytes))
    }

    /// Unpadded base64url (RFC 4648 §5).
    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension PKCEVerifier: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "PKCEVerifier(<redacted>, challenge: \(self.challenge))" }
    public var debugDescription: String { self.description }
    public var customMirror: Mirror {
        Mirror(self, children: ["verifier": "<redacted>", "challenge": self.challenge])
    }
}
