//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Logging settings. Logs are JSON lines and never contain a token or a secret.
public struct LogConfiguration: Sendable, Equatable {
    /// Default `info`.
    public var level: LogLevelName
    /// One JSON line per request. Default true.
    public var accessLog: Bool

    public init(level: LogLevelName = .info, accessLog: Bool = true) {
        self.level = level
        self.accessLog = accessLog
    }
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
