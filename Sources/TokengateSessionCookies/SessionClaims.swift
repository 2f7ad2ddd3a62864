//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What a format's reader found in an authentic cookie, before the time, cutoff and kind checks.
struct SessionClaims: Sendable {
    var userID: String
    /// Seconds since 1970.
    var loginTime: Int64
    var apiOnly: Bool
    /// The format's own signing time (Flask, Django), for its max-age and the not-in-the-future check.
    var signedAt: Int64? = nil
    /// The format's own expiry (Rails' `exp`; Flask's and Django's signing time plus their max-age).
    var formatExpiresAt: Int64? = nil
}

/// A reader's answer.
enum SessionRead: Sendable {
    case claims(SessionClaims)
    case rejected(SessionCookieRejection)
}

/// Reads the configured fields out of a scanned session.
enum SessionFieldReader {
    /// The fields at hit indices `first` (user id), `first + 1` (login time) and, when configured, `first + 2`
    /// (the api-only flag) of `scanner`.
    static func read(_ scanner: SessionJSONScanner, first: Int, hasAPIFlag: Bool) -> SessionRead {
        let user = scanner.hits[first]
        let userID: String
        switch user.kind {
        case .absent, .null:
            return .rejected(.missingUser)
        case .string:
            let bytes = scanner.bytes(user)
            guard
                UserIDCheck.isUsable(bytes)
            else { return .rejected(.badUser) }
            userID = String(decoding: bytes, as: UTF8.self)
        case .number:
            let bytes = scanner.bytes(user)
            // Integers only, as the frameworks' ids are: a fraction or exponent is no id.
            guard bytes.count <= 20, !bytes.isEmpty,
                bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") || $0 == UInt8(ascii: "-") }),
                bytes.dropFirst().allSatisfy({ $0 != UInt8(ascii: "-") })
            else { return .rejected(.badUser) }
            userID = String(decoding: bytes, as: UTF8.self)
        case .true, .false, .object, .array:
            return .rejected(.badUser)
        }
        let login = scanner.hits[first + 1]
        let loginTime: Int64
        switch login.kind {
        case .absent, .null:
            return .rejected(.missingLoginTime)
        case .number:
            guard let seconds = Self.seconds(scanner.bytes(login)) else { return .rejected(.badLoginTime) }
            loginTime = seconds
        case .string, .true, .false, .object, .array:
            return .rejected(.badLoginTime)
        }
        var apiOnly = false
        if hasAPIFlag {
            switch scanner.hits[first + 2].kind {
            case .absent: apiOnly = false
            case .true: apiOnly = true
            case .false: apiOnly = false
            case .null, .string, .number, .object, .array: return .rejected(.badAPIFlag)
            }
        }
        return .claims(SessionClaims(userID: userID, loginTime: loginTime, apiOnly: apiOnly))
    }

    /// The latest time accepted anywhere: 9999-12-31T23:59:59Z, as for a JWT's NumericDate.
    static let latestTime: Int64 = 253_402_300_799

    /// A JSON number as whole seconds since 1970: digits, then an optional fraction that is dropped (Python's
    /// `time.time()` has one). Negative numbers, exponents and times past ``latestTime`` are not login times.
    static func seconds(_ text: UnsafeRawBufferPointer) -> Int64? {
        var value: Int64 = 0
        var digits = 0
        var index = 0
        while index < text.count, text[index] >= UInt8(ascii: "0"), text[index] <= UInt8(ascii: "9") {
            value = value * 10 + Int64(text[index] - UInt8(ascii: "0"))
            digits += 1
            index += 1
            if digits > 12 { return nil }
        }
        guard digits > 0 else { return nil }
        if index < text.count {
            guard text[index] == UInt8(ascii: ".") else { return nil }
            index += 1
            while index < text.count {
                guard text[index] >= UInt8(ascii: "0"), text[index] <= UInt8(ascii: "9") else { return nil }
                index += 1
            }
        }
        return value <= Self.latestTime ? value : nil
    }
}
