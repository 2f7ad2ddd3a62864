//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// HTTP dates (RFC 9110 §5.6.7) as found in cookie `Expires`: the IMF-fixdate, and the obsolete RFC 850 and
/// asctime forms, plus the dashed form old servers still send (`Wed, 21-Oct-2015 07:28:00 GMT`).
enum HTTPDate {
    static func parse(_ text: String) -> Date? {
        var trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 64 else { return nil }
        trimmed = Self.expandingTwoDigitYear(trimmed)
        for format in Self.formats {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) { return date }
        }
        return nil
    }

    private static let formats = [
        "EEE, dd MMM yyyy HH:mm:ss zzz",
        "EEE, dd-MMM-yyyy HH:mm:ss zzz",
        "EEEE, dd-MMM-yyyy HH:mm:ss zzz",
        "EEE MMM d HH:mm:ss yyyy",
    ]

    /// RFC 850's `Sunday, 06-Nov-94 08:49:37 GMT` with the year written out by RFC 6265 §5.1.1's rule (70–99 are
    /// 19xx, 00–69 are 20xx); formatters disagree across platforms on two-digit years.
    private static func expandingTwoDigitYear(_ text: String) -> String {
        var words = text.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
        guard words.count >= 2 else { return text }
        let parts = words[1].split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[2].count == 2, let year = Int(parts[2]) else { return text }
        words[1] = "\(parts[0])-\(parts[1])-\(year < 70 ? 2000 + year : 1900 + year)"
        return words.joined(separator: " ")
    }
}
