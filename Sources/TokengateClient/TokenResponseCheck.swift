//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What an API response means for the stored token (tokengate's answers follow RFC 6750 §3).
public enum TokenResponseOutcome: Sendable, Hashable {
    /// Not about the token: use the response.
    case proceed
    /// `401` with a Bearer challenge: the token is missing, expired, revoked (password change, "disable
    /// mobile apps") or bad. Drop it and open the token page again.
    case loginRequired
    /// `403 insufficient_scope`: a valid token of the wrong kind for this route (e.g. a session token on an
    /// api route). Logging in again gives the same kind; this is a bug in the app or the site's routes.
    case wrongKind
    /// `400`/`401 invalid_request`: the request itself was wrong (two tokens, a token in the URL). The token
    /// is kept.
    case invalidRequest
}

/// Reads an API response's status and `WWW-Authenticate` challenge.
public enum TokenResponseCheck {
    /// - Parameters:
    ///   - status: the HTTP status code.
    ///   - wwwAuthenticate: every `WWW-Authenticate` value (or one folded with commas).
    public static func outcome(status: Int, wwwAuthenticate: [String]) -> TokenResponseOutcome {
        let bearer = wwwAuthenticate.flatMap(AuthenticateChallenge.parse).first { $0.scheme.lowercased() == "bearer" }
        let error = bearer?.parameters["error"]
        switch (status, error) {
        case (400, "invalid_request"), (401, "invalid_request"):
            return .invalidRequest
        case (401, _) where bearer != nil:
            return .loginRequired
        case (403, "insufficient_scope"):
            return .wrongKind
        default:
            return .proceed
        }
    }

    /// ``outcome(status:wwwAuthenticate:)`` for a `URLResponse`; on ``TokenResponseOutcome/loginRequired`` the
    /// token is set to `nil`, so the app cannot keep sending a dead token.
    public static func handle(_ response: URLResponse, token: inout StoredToken?) -> TokenResponseOutcome {
        guard let http = response as? HTTPURLResponse else { return .proceed }
        let challenge = http.value(forHTTPHeaderField: "WWW-Authenticate")
        let outcome = Self.outcome(status: http.statusCode, wwwAuthenticate: challenge.map { [$0] } ?? [])
        if outcome == .loginRequired { token = nil }
        return outcome
    }
}

/// One challenge of a `WWW-Authenticate` value (RFC 9110 §11.6.1): a scheme and its `name=value` parameters
/// (names lower-cased; values unquoted, `\` escapes resolved). A `token68` after the scheme is skipped.
struct AuthenticateChallenge: Sendable, Hashable {
    var scheme: String
    var parameters: [String: String]

    /// Every challenge in a header value; challenges and parameters are both comma-separated, so a new
    /// challenge starts at a token that is not followed by `=`.
    static func parse(_ header: String) -> [AuthenticateChallenge] {
        var scanner = Scanner(Array(header.utf8.prefix(8192)))
        var challenges: [AuthenticateChallenge] = []
        while true {
            scanner.skip { $0 == 0x20 || $0 == 0x09 || $0 == UInt8(ascii: ",") }
            guard let scheme = scanner.token() else { break }
            var challenge = AuthenticateChallenge(scheme: scheme, parameters: [:])
            while true {
                scanner.skip { $0 == 0x20 || $0 == 0x09 || $0 == UInt8(ascii: ",") }
                let mark = scanner.index
                guard let name = scanner.token() else {
                    scanner.skip { $0 != UInt8(ascii: ",") }  // token68 or junk
                    if scanner.atEnd { break }
                    continue
                }
                scanner.skip { $0 == 0x20 || $0 == 0x09 }
                guard scanner.consume(UInt8(ascii: "=")) else {
                    scanner.index = mark  // the next challenge's scheme
                    break
                }
                if scanner.peek == UInt8(ascii: "=") {
                    // token68 padding such as "abc==" read as a name: skip it.
                    scanner.skip { $0 != UInt8(ascii: ",") }
                    continue
                }
                scanner.skip { $0 == 0x20 || $0 == 0x09 }
                let value = scanner.quotedString() ?? scanner.token() ?? ""
                if challenge.parameters[name.lowercased()] == nil {
                    challenge.parameters[name.lowercased()] = value
                }
            }
            challenges.append(challenge)
            if scanner.atEnd { break }
        }
        return challenges
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        var atEnd: Bool { self.index >= self.bytes.count }
        var peek: UInt8? { self.atEnd ? nil : self.bytes[self.index] }

        mutating func skip(while predicate: (UInt8) -> Bool) {
            while let byte = self.peek, predicate(byte) { self.index += 1 }
        }

        mutating func consume(_ byte: UInt8) -> Bool {
            guard self.peek == byte else { return false }
            self.index += 1
            return true
        }

        /// An RFC 9110 `token`.
        mutating func token() -> String? {
            let start = self.index
            self.skip(while: Self.isTokenByte)
            guard self.index > start else { return nil }
            return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
        }

        /// A `quoted-string`, unescaped; `nil` (and nothing consumed) when none starts here.
        mutating func quotedString() -> String? {
            guard self.peek == UInt8(ascii: "\"") else { return nil }
            self.index += 1
            var value: [UInt8] = []
            while let byte = self.peek {
                self.index += 1
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\"), let next = self.peek {
                    value.append(next)
                    self.index += 1
                } else {
                    value.append(byte)
                }
            }
            return String(decoding: value, as: UTF8.self)
        }

        static func isTokenByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }
}
