//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Parses the cutoff times an admin may give: RFC 3339 date-times (`2024-05-01T12:00:00Z`,
/// `2024-05-01T14:00:00.25+02:00`) and decimal UNIX seconds (`1714564800`).
///
/// Written by hand rather than with `ISO8601DateFormatter` because that formatter accepts many ISO 8601
/// variants (week dates, missing offsets) that RFC 3339 does not, and a cutoff must never be read in a
/// local time zone by accident.
public enum CutoffTime {
    /// The longest text accepted; a full RFC 3339 date-time with nanoseconds is 35 bytes.
    package static let maxLength = 64

    /// Parses an RFC 3339 date-time or decimal UNIX seconds into UNIX seconds.
    ///
    /// Fractional seconds round *up*: tokens carry whole-second `iat`s, and a token stamped with the same
    /// second as a fractional cutoff may have been issued before it, so the cutoff fails closed.
    public static func parse(_ text: String) throws -> Int64 {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maxLength else {
            throw Self.invalid("a time must be UNIX seconds or an RFC 3339 date-time")
        }
        if bytes.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            guard bytes.count <= 12, let seconds = Int64(text) else {
                throw Self.invalid("the UNIX time is out of range")
            }
            return seconds
        }
        return try Self.parseRFC3339(bytes)
    }

    private static func parseRFC3339(_ b: [UInt8]) throws -> Int64 {
        var index = 0

        func digits(_ count: Int) throws -> Int64 {
            var value: Int64 = 0
            for _ in 0..<count {
                guard index < b.count, b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") else {
                    throw Self.invalid("expected an RFC 3339 date-time such as 2024-05-01T12:00:00Z")
                }
                value = value * 10 + Int64(b[index] - UInt8(ascii: "0"))
                index += 1
            }
            return value
        }

        func expect(_ characters: String) throws {
            guard index < b.count, characters.utf8.contains(b[index]) else {
                throw Self.invalid("expected an RFC 3339 date-time such as 2024-05-01T12:00:00Z")
            }
            index += 1
        }

        let year = try digits(4)
        try expect("-")
        let month = try digits(2)
        try expect("-")
        let day = try digits(2)
        try expect("Tt")
        let hour = try digits(2)
        try expect(":")
        let minute = try digits(2)
        try expect(":")
        let second = try digits(2)

        var hasFraction = false
        if index < b.count, b[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < b.count, b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") {
                if b[index] != UInt8(ascii: "0") {
                    hasFraction = true
                }
                index += 1
            }
            guard index > start else {
                throw Self.invalid("a fractional second needs at least one digit")
            }
        }

        var offsetSeconds: Int64 = 0
        guard index < b.count else {
            throw Self.invalid("an RFC 3339 date-time needs a time zone offset (Z or ±hh:mm)")
        }
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            index += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            let sign: Int64 = b[index] == UInt8(ascii: "+") ? 1 : -1
            index += 1
            let offsetHours = try digits(2)
            try expect(":")
            let offsetMinutes = try digits(2)
            guard offsetHours <= 23, offsetMinutes <= 59 else {
                throw Self.invalid("the time zone offset is out of range")
            }
            offsetSeconds = sign * (offsetHours * 3600 + offsetMinutes * 60)
        default:
            throw Self.invalid("an RFC 3339 date-time needs a time zone offset (Z or ±hh:mm)")
        }
        guard index == b.count else {
            throw Self.invalid("unexpected characters after the date-time")
        }

        guard (1...12).contains(month), day >= 1, day <= Self.daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else {
            throw Self.invalid("the date or time is out of range")
        }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        var seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds
        if hasFraction {
            seconds += 1
        }
        return seconds
    }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2:
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            return leap ? 29 : 28
        case 4, 6, 9, 11:
            return 30
        default:
            return 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    private static func invalid(_ message: String) -> CutoffStoreError {
        CutoffStoreError(code: .invalidTime, message: message)
    }
}
