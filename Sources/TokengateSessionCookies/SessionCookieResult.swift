//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

/// A session cookie's verdict: the verified login, or the specific reason it was refused.
public enum SessionCookieResult: Sendable, Hashable {
    /// `subject` is the user id, `issuedAt` the login time, `kind` from the api-only flag, `keyID` nil.
    case valid(VerifiedToken)
    case invalid(SessionCookieRejection)

    /// The same verdict in a JWT's terms (what routes answer with).
    public var verificationResult: VerificationResult {
        switch self {
        case .valid(let token): .valid(token)
        case .invalid(let rejection): .invalid(rejection.reason)
        }
    }

    public var token: VerifiedToken? {
        if case .valid(let token) = self { return token }
        return nil
    }

    public var rejection: SessionCookieRejection? {
        if case .invalid(let rejection) = self { return rejection }
        return nil
    }
}
