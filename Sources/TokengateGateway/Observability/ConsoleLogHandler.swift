//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import TokengateHTTP

/// Log lines for a person at a terminal (`log.format: console`, or `auto` on a terminal):
///
///     2026-12-07T13:45:01.123Z info  request GET /api/hello 401 no_token 0.21ms client=127.0.0.1 route=/api/
///
/// The time, the level, the message, then the metadata as `key=value`: for a request line the method, path,
/// status, reason and duration first and without their keys, the rest in key order. The same members as the
/// JSON lines, under the same rules (no token, no secret, no query string); only the layout differs.
///
/// Values a client chose (a path, a user agent) may hold anything a terminal acts on, so every control
/// character is written escaped (ESC as `\x1b`): a log line must not move the cursor or recolour the
/// operator's terminal. A value with a space, a quote or nothing in it is quoted.
public struct ConsoleLogHandler: LogHandler {
    public var logLevel: Logger.Level {
        get { self.ownLevel ?? ProcessLogLevel.current }
        set { self.ownLevel = newValue }
    }
    private var ownLevel: Logger.Level?
    public var metadata: Logger.Metadata = [:]
    private let label: String
    private let writer: LogLineWriter

    /// The members a request line shows first, without their keys.
    static let leadingRequestMembers = ["method", "path", "status", "reason"]

    public init(label: String) {
        self.init(label: label, writer: .standardOutput)
    }

    init(label: String, writer: LogLineWriter) {
        self.label = label
        self.writer = writer
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var metadata = self.metadata
        if let eventMetadata = event.metadata {
            metadata.merge(eventMetadata) { _, new in new }
        }
        self.writer.write(Self.line(level: event.level, message: event.message.description, metadata: metadata))
    }

    static func line(level: Logger.Level, message: String, metadata: Logger.Metadata) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        LogTimestamp.append(to: &line)
        line.append(UInt8(ascii: " "))
        let levelName = level.rawValue
        line.append(contentsOf: levelName.utf8)
        for _ in levelName.utf8.count..<8 { line.append(UInt8(ascii: " ")) }
        Self.appendEscaped(message, to: &line)
        var rest = metadata
        if message == "request" {
            for key in Self.leadingRequestMembers {
                guard let value = rest.removeValue(forKey: key) else { continue }
                line.append(UInt8(ascii: " "))
                Self.appendValue(Self.text(value), to: &line)
            }
            if let duration = rest.removeValue(forKey: "duration_us"), let micros = Int(Self.text(duration)) {
                line.append(UInt8(ascii: " "))
                line.append(contentsOf: Self.milliseconds(micros).utf8)
            }
        }
        for (key, value) in rest.sorted(by: { $0.key < $1.key }) {
            line.append(UInt8(ascii: " "))
            Self.appendEscaped(key, to: &line)
            line.append(UInt8(ascii: "="))
            Self.appendValue(Self.text(value), to: &line)
        }
        line.append(UInt8(ascii: "\n"))
        return line
    }

    /// `0.21ms`, `12.3ms`, `1520ms`: three significant digits are plenty for a person.
    static func milliseconds(_ micros: Int) -> String {
        if micros >= 100_000 { return "\(micros / 1000)ms" }
        if micros >= 10_000 { return "\(micros / 1000).\(micros / 100 % 10)ms" }
        let hundredths = micros / 10
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)ms"
    }

    private static func text(_ value: Logger.Metadata.Value) -> String {
        if case .string(let text) = value { return text }
        return value.description
    }

    private static func appendValue(_ value: String, to line: inout [UInt8]) {
        let needsQuotes = value.isEmpty || value.utf8.contains { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\"") }
        if needsQuotes { line.append(UInt8(ascii: "\"")) }
        for scalar in value.unicodeScalars {
            if needsQuotes, scalar == "\"" || scalar == "\\" {
                line.append(UInt8(ascii: "\\"))
            }
            Self.append(scalar, to: &line)
        }
        if needsQuotes { line.append(UInt8(ascii: "\"")) }
    }

    private static func appendEscaped(_ text: String, to line: inout [UInt8]) {
        for scalar in text.unicodeScalars { Self.append(scalar, to: &line) }
    }

    /// A control character (C0, DEL and C1, which some terminals take as escape sequences too) as `\xNN`;
    /// anything else as its UTF-8.
    private static func append(_ scalar: Unicode.Scalar, to line: inout [UInt8]) {
        let value = scalar.value
        guard value < 0x20 || (0x7F...0x9F).contains(value) else {
            line.append(contentsOf: String(scalar).utf8)
            return
        }
        let digits = Array("0123456789abcdef".utf8)
        line.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "x"), digits[Int(value >> 4)], digits[Int(value & 0xF)]])
    }
}
