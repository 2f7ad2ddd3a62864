//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// The `expires_in` of a token delivery (RFC 6749 §5.1: the token's lifetime in seconds), held to one rule
/// whether it came in the callback's parameters (``TokenCapture``) or in the redemption's JSON
/// (``CodeRedemption``).
enum ExpiresIn {
    /// A century: no lifetime anyone configures is longer, and the date stays exact.
    static let maximumSeconds: Int64 = 100 * 365 * 86_400

    /// The expiry `seconds` after `now`.
    /// - Throws: ``TokengateClientError`` with `code` when `seconds` is missing (not a whole number where it was
    ///   read), negative or over ``maximumSeconds``.
    static func expiry(after seconds: Int64?, from now: Date, malformed code: TokengateClientError.Code) throws -> Date {
        guard let seconds, (0...Self.maximumSeconds).contains(seconds) else {
            throw TokengateClientError(code, "expires_in is not a number of seconds")
        }
        return now.addingTimeInterval(TimeInterval(seconds))
    }

    /// The whole number a JSON value holds; `nil` for a string, a fraction, or `true`/`false`, which
    /// `JSONSerialization` hands over as numbers 1 and 0 (and the callback, whose `expires_in=true` is no number,
    /// refuses too).
    static func seconds(inJSON value: Any) -> Int64? {
        guard let number = value as? NSNumber, type(of: number) != Self.booleanType else { return nil }
        return Int64(exactly: number.doubleValue)
    }

    private static let booleanType = type(of: NSNumber(value: true))
}
