//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import TokengateHTTP

/// A swift-log handler that writes one JSON object per line to standard output (through ``LogLineWriter``):
/// `{"ts":"…","level":"info","label":"…","msg":"…",…metadata}`.
///
/// Metadata values are written as JSON strings. Callers never put a token or secret into metadata:
/// that rule is the callers' (the access log writes the path without its query, the user id and the
/// reason code, nothing else), and the tests grep the logs for tokens.
public struct JSONLogHandler: LogHandler {
    /// The process's level (``ProcessLogLevel``, which a reload moves), unless this handler's own was set.
    public var logLevel: Logger.Level {
        get { self.ownLevel ?? ProcessLogLevel.current }
        set { self.ownLevel = newValue }
    }
    private var ownLevel: Logger.Level?
    public var metadata: Logger.Metadata = [:]
    /// `"label":"…"` with its leading comma, quoted once rather than on every line.
    private let labelMember: [UInt8]
    private let writer: LogLineWriter

    /// A handler writing to standard output at the process's level.
    public init(label: String) {
        self.init(label: label, writer: .standardOutput)
    }

    /// A handler writing to `writer` (the tests' pipe) instead of standard output.
    init(label: String, writer: LogLineWriter) {
        self.writer = writer
        var member = Array(#","label":"#.utf8)
        JSONString.append(label, to: &member)
        self.labelMember = member
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { self.metadata[key] }
        set { self.metadata[key] = newValue }
    }

    /// Renders the line as bytes, in one buffer, and queues it.
    ///
    /// Every request with the access log on comes through here, so the line is built without `String`
    /// concatenation or Foundation: on the benchmark VM the string-built line cost 46–61 µs of CPU a request
    /// and halved the gateway's requests per second; the byte-built one costs 5–7 µs (docs/performance.md,
    /// "The access log").
    public func log(event: LogEvent) {
        var line: [UInt8] = []
        line.reserveCapacity(1024)
        line.append(contentsOf: #"{"ts":""#.utf8)
        LogTimestamp.append(to: &line)
        line.append(contentsOf: #"","level":""#.utf8)
        line.append(contentsOf: event.level.rawValue.utf8)
        line.append(UInt8(ascii: "\""))
        line.append(contentsOf: self.labelMember)
        line.append(contentsOf: #","msg":"#.utf8)
        JSONString.append(event.message.description, to: &line)
        // The handler's own metadata is empty in the gateway; merge only when both have some.
        let metadata: Logger.Metadata
        if let eventMetadata = event.metadata, !eventMetadata.isEmpty {
            metadata = self.metadata.isEmpty ? eventMetadata : self.metadata.merging(eventMetadata) { _, new in new }
        } else {
            metadata = self.metadata
        }
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line.append(UInt8(ascii: ","))
            JSONString.append(key, to: &line)
            line.append(UInt8(ascii: ":"))
            switch value {
            case .string(let value): JSONString.append(value, to: &line)
            case let value: JSONString.append(value.description, to: &line)
            }
        }
        line.append(contentsOf: "}\n".utf8)
        // Queued for a thread of its own (``LogLineWriter``): a stalled reader must not stop the caller.
        self.writer.write(line)
    }
}
