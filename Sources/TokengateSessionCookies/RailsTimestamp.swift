//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The expiry in Rails' message metadata: `Time#utc.iso8601(3)`, e.g. `2026-12-07T03:00:00.000Z`.
///
/// Only that UTC form is read (with or without the milliseconds, which are dropped): it is the only one Rails
/// writes, and reading offsets or other ISO 8601 shapes would only widen what an attacker can try.
enum RailsTimestamp {
    /// Seconds since 1970 for `YYYY-MM-DDTHH:MM:SS[.fff]Z`, or nil.
    static func parse(_ text: UnsafeRawBufferPointer) -> Int64? {
        guard text.count == 20 || text.count == 24 else { return nil }
        func number(_ offset: Int, _ length: Int) -> Int64? {
            var value: Int64 = 0
            for index in offset..<(offset + length) {
                let byte = text[index]
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            return value
        }
        guard text[4] == UInt8(ascii: "-"), text[7] == UInt8(ascii: "-"), text[10] == UInt8(ascii: "T"),
            text[13] == UInt8(ascii: ":"), text[16] == UInt8(ascii: ":"), text[text.count - 1] == UInt8(ascii: "Z"),
            let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2)
        else { return nil }
        if text.count == 24 {
            guard text[19] == UInt8(ascii: "."), number(20, 3) != nil else { return nil }
        }
        guard (1...12).contains(month), day >= 1, day <= Self.daysInMonth(year: year, month: month), hour < 24,
            minute < 60, second < 60
        else { return nil }
        return Self.daysFromCivil(year: year, month: month, day: day) * 86_400 + hour * 3600 + minute * 60 + second
    }

    /// `YYYY-MM-DDTHH:MM:SS.000Z` for `seconds` (0 … year 9999).
    static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let rest = seconds - days * 86_400
        let (year, month, day) = Self.civil(fromDays: days)
        func pad(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(rest / 3600, 2)):\(pad(rest / 60 % 60, 2)):"
            + "\(pad(rest % 60, 2)).000Z"
    }

    private static func daysInMonth(year: Int64, month: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    private static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The inverse of ``daysFromCivil(year:month:day:)`` (`civil_from_days`).
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
