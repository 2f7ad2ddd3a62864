//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

/// Why a session cookie was refused: a specific code for logs, metrics and tests (`inflated_too_large`,
/// `marshal_refused`, …) and the ``RejectionReason`` a JWT would get for the same kind of fault, which is what a
/// client is told (the same 401 as a bad JWT: a client learns nothing about the site's session format).
///
/// A struct with static members rather than an enum so that codes can be added without breaking callers
/// (STYLE §2). Built from string literals: returning one allocates nothing. Equality uses the code alone. No
/// description carries cookie content, a secret or a library message.
public struct SessionCookieRejection: Hashable, Sendable, CustomStringConvertible {
    /// The stable specific code.
    public let code: String
    /// What the client is answered with.
    public let reason: RejectionReason
    /// A short human text without internals.
    public let description: String

    init(_ code: String, _ reason: RejectionReason, _ description: String) {
        self.code = code
        self.reason = reason
        self.description = description
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    // MARK: Shape

    public static let oversize = Self("oversize", .malformed, "The cookie is longer than the limit.")
    public static let truncated = Self("truncated", .malformed, "The cookie lacks a part its format has.")
    public static let badEncoding = Self(
        "bad_encoding", .malformed, "The cookie is not in its format's canonical encoding.")
    public static let missingSignatureCookie = Self(
        "missing_signature_cookie", .malformed, "The signature cookie that goes with the session cookie is absent.")

    // MARK: Authenticity

    public static let badSignature = Self(
        "bad_signature", .badSignature, "The cookie was not signed (or encrypted) with a configured secret.")

    // MARK: Content

    public static let inflatedTooLarge = Self(
        "inflated_too_large", .malformed, "The compressed session inflates past the limit.")
    public static let badCompression = Self("bad_compression", .malformed, "The compressed session is not valid zlib.")
    public static let marshalRefused = Self(
        "marshal_refused", .malformed, "The session is Ruby Marshal data, which is never deserialized.")
    public static let notJSON = Self("not_json", .malformed, "The session is not JSON.")
    public static let badJSON = Self("bad_json", .malformed, "The session is not valid JSON.")
    public static let jsonTooDeep = Self("json_too_deep", .malformed, "The session nests too deeply.")
    public static let duplicateField = Self(
        "duplicate_field", .malformed, "A configured field appears twice in the session.")
    public static let missingMetadata = Self(
        "missing_metadata", .malformed, "The cookie lacks the framework's metadata envelope.")
    public static let wrongPurpose = Self(
        "wrong_purpose", .malformed, "The cookie was made for another cookie name or purpose.")
    public static let badMetadata = Self("bad_metadata", .malformed, "The cookie's metadata is malformed.")

    // MARK: Fields

    public static let missingUser = Self("missing_user", .missingClaim, "The session has no user id.")
    public static let badUser = Self("bad_user", .malformed, "The session's user id is not a usable id.")
    public static let missingLoginTime = Self(
        "missing_login_time", .missingClaim, "The session has no login time.")
    public static let badLoginTime = Self("bad_login_time", .malformed, "The session's login time is not a time.")
    public static let badAPIFlag = Self("bad_api_flag", .malformed, "The session's api-only flag is not a boolean.")

    // MARK: Time, cutoffs, kind

    public static let formatExpired = Self("format_expired", .expired, "The cookie has expired.")
    public static let signedInFuture = Self(
        "signed_in_future", .issuedInFuture, "The cookie was signed in the future.")
    public static let loginInFuture = Self("login_in_future", .issuedInFuture, "The login time is in the future.")
    public static let sessionExpired = Self(
        "session_expired", .expired, "The login is older than the session max-age.")
    public static let revoked = Self("revoked", .revoked, "The login is older than a cutoff.")
    public static let apiRevoked = Self("api_revoked", .apiRevoked, "App access has been revoked for this user.")
    public static let wrongKind = Self("wrong_kind", .wrongKind, "This kind of token is not accepted here.")

    /// Every code, in a stable order (metrics pre-registration, tests).
    public static let all: [Self] = [
        .oversize, .truncated, .badEncoding, .missingSignatureCookie, .badSignature, .inflatedTooLarge,
        .badCompression, .marshalRefused, .notJSON, .badJSON, .jsonTooDeep, .duplicateField, .missingMetadata,
        .wrongPurpose, .badMetadata, .missingUser, .badUser, .missingLoginTime, .badLoginTime, .badAPIFlag,
        .formatExpired, .signedInFuture, .loginInFuture, .sessionExpired, .revoked, .apiRevoked, .wrongKind,
    ]
}
