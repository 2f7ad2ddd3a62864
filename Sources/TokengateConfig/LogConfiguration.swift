//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Logging settings. Logs never contain a token or a secret.
public struct LogConfiguration: Sendable, Equatable {
    /// Default `info`.
    public var level: LogLevelName
    /// One line per request. Default true.
    public var accessLog: Bool
    /// JSON lines, human-readable lines, or (the default) human-readable on a terminal and JSON otherwise.
    public var format: LogFormat

    public init(level: LogLevelName = .info, accessLog: Bool = true, format: LogFormat = .auto) {
        self.level = level
        self.accessLog = accessLog
        self.format = format
    }
}

/// `log.format`: how lines are written. Read at start (a reload keeps the format the process started with).
public enum LogFormat: String, Sendable, Equatable, CaseIterable {
    /// One JSON object a line: for journald, a container's log driver, a log pipeline.
    case json
    /// `time level message key=value…`, for a person at a terminal.
    case console
    /// `console` when standard output is a terminal, else `json`.
    case auto
}

/// swift-log's levels by name (this module does not depend on swift-log).
public enum LogLevelName: String, Sendable, Equatable, CaseIterable {
    case trace
    case debug
    case info
    case notice
    case warning
    case error
    case critical
}
