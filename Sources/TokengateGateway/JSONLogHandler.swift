//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import Foundation
import Logging

/// A swift-log handler that writes one JSON object per line to standard output (through ``LogLineWriter``):
/// `{"ts":"…","level":"info","label":"…","msg":"…",…metadata}`.
///
/// Metadata values are written as JSON strings. Callers never put a token or secret into metadata:
/// that rule is the callers' (the access log writes the path without its query, the user id and the
/// reason code, nothing else), and the tests grep the logs for tokens.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String, level: Logger.Level = .info) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let metadata = event.metadata
        var line = "{\"ts\":\(JSONString.quote(Self.timestamp())),\"level\":\"\(event.level.rawValue)\""
        line += ",\"label\":\(JSONString.quote(self.label)),\"msg\":\(JSONString.quote(event.message.description))"
        let merged = metadata.map { self.metadata.merging($0) { _, new in new } } ?? self.metadata
        for key in merged.keys.sorted() {
            line += ",\(JSONString.quote(key)):\(JSONString.quote(merged[key]!.description))"
        }
        line += "}\n"
        // Queued for a thread of its own (``LogLineWriter``): a stalled reader must not stop the caller.
        LogLineWriter.standardOutput.write(line)
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
            Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
            Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(now.tv_nsec / 1_000_000)
        )
    }
}
