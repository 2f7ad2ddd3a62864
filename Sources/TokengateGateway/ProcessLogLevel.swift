//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import Logging
import TokengateConfig

/// The process's log level (`log.level`), which every ``JSONLogHandler`` reads on each log call: set at start
/// and by a reload, so that an operator can turn on `debug` for a while and back off without a restart.
///
/// Process-wide like swift-log's `LoggingSystem`, which is bootstrapped once: the handlers a `Logger` made
/// at start keep their identity, and only the level they report moves. Read with a relaxed atomic load,
/// since every log call (an access-log line per request) asks.
public enum ProcessLogLevel {
    private static let raw = ManagedAtomic<Int>(Self.index(of: .info))

    public static var current: Logger.Level {
        get { Logger.Level.allCases[Self.raw.load(ordering: .relaxed)] }
        set { Self.raw.store(Self.index(of: newValue), ordering: .relaxed) }
    }

    /// Sets the level from the configuration's name for it.
    public static func set(_ name: LogLevelName) {
        Self.current = Logger.Level(rawValue: name.rawValue) ?? .info
    }

    private static func index(of level: Logger.Level) -> Int {
        Logger.Level.allCases.firstIndex(of: level)!
    }
}
