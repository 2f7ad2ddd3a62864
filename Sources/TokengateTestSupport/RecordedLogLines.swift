//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers

/// Every line a `Logger` made by ``logger()`` writes, in order: its level, message and metadata (the handler's
/// merged with the event's, values as text). For tests that check what is logged, and what never is.
public final class RecordedLogLines: Sendable {
    public struct Line: Sendable, CustomStringConvertible {
        public let level: Logger.Level
        public let message: String
        public let metadata: [String: String]

        /// The message and every metadata value, to search for what must never be logged.
        public var text: String {
            ([self.message] + self.metadata.values).joined(separator: " ")
        }

        public var description: String {
            "\(self.level) \(self.message) \(self.metadata)"
        }
    }

    private let box = NIOLockedValueBox<[Line]>([])

    public init() {}

    public var all: [Line] { self.box.withLockedValue { $0 } }

    public func logger() -> Logger {
        Logger(label: "test") { _ in Recorder(lines: self) }
    }

    private struct Recorder: LogHandler {
        let lines: RecordedLogLines
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { self.metadata[key] }
            set { self.metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let metadata = self.metadata.merging(event.metadata ?? [:]) { $1 }.mapValues { "\($0)" }
            let line = Line(level: event.level, message: "\(event.message)", metadata: metadata)
            self.lines.box.withLockedValue { $0.append(line) }
        }
    }
}
