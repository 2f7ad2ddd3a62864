//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import TokengateHTTP

/// The `ts` of a log line: the current UTC time to the millisecond, `2026-11-27T05:26:51.123Z`.
///
/// Written digit by digit into the line's bytes: every access-log line has one, and formatting it with
/// `String(format:)` went through Foundation's `CFString` formatter for microseconds a line.
enum LogTimestamp {
    /// Appends the current time (24 bytes, no quotes) to `output`.
    static func append(to output: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        Self.append(seconds: now.tv_sec, milliseconds: Int(now.tv_nsec / 1_000_000), to: &output)
    }

    /// Appends the UTC time `seconds` after the epoch, plus `milliseconds`, to `output`.
    static func append(seconds: time_t, milliseconds: Int, to output: inout [UInt8]) {
        var seconds = seconds
        var parts = tm()
        gmtime_r(&seconds, &parts)
        Self.appendDigits(Int(parts.tm_year) + 1900, count: 4, to: &output)
        output.append(UInt8(ascii: "-"))
        Self.appendDigits(Int(parts.tm_mon) + 1, count: 2, to: &output)
        output.append(UInt8(ascii: "-"))
        Self.appendDigits(Int(parts.tm_mday), count: 2, to: &output)
        output.append(UInt8(ascii: "T"))
        Self.appendDigits(Int(parts.tm_hour), count: 2, to: &output)
        output.append(UInt8(ascii: ":"))
        Self.appendDigits(Int(parts.tm_min), count: 2, to: &output)
        output.append(UInt8(ascii: ":"))
        Self.appendDigits(Int(parts.tm_sec), count: 2, to: &output)
        output.append(UInt8(ascii: "."))
        Self.appendDigits(milliseconds, count: 3, to: &output)
        output.append(UInt8(ascii: "Z"))
    }

    /// The current time as a `String` (for lines that are not on the request path).
    static func now() -> String {
        var bytes: [UInt8] = []
        Self.append(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `value`'s last `count` decimal digits, zero-padded.
    private static func appendDigits(_ value: Int, count: Int, to output: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<count { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            output.append(UInt8(ascii: "0") + UInt8((rest / divisor) % 10))
            rest %= divisor
            divisor /= 10
        }
    }
}
