//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Logging
import TokengateConfig
import TokengateHTTP

/// The process's log level (`log.level`), which every ``JSONLogHandler`` reads on each log call: set at start
/// and by a reload, so that an operator can turn on `debug` for a while and back off without a restart.
///
/// Process-wide like swift-log's `LoggingSystem`, which is bootstrapped once: the handlers a `Logger` made
/// at start keep their identity, and only the level they report moves. Read with a relaxed atomic load,
/// since every log call (an access-log line per request) asks.
public enum ProcessLogLevel {
    private static let raw = ManagedAtomic<UInt8>(Self.code(of: .info))

    public static var current: Logger.Level {
        get { Self.level(of: Self.raw.load(ordering: .relaxed)) }
        set { Self.raw.store(Self.code(of: newValue), ordering: .relaxed) }
    }

    /// Sets the level from the configuration's name for it.
    public static func set(_ name: LogLevelName) {
        Self.current = Logger.Level(rawValue: name.rawValue) ?? .info
    }

    // Plain switches both ways: `Logger.Level.allCases` would build an array on every log call.
    private static func code(of level: Logger.Level) -> UInt8 {
        switch level {
        case .trace: 0
        case .debug: 1
        case .info: 2
        case .notice: 3
        case .warning: 4
        case .error: 5
        case .critical: 6
        }
    }

    private static func level(of code: UInt8) -> Logger.Level {
        switch code {
        case 0: .trace
        case 1: .debug
        case 2: .info
        case 3: .notice
        case 4: .warning
        case 5: .error
        default: .critical
        }
    }
}
