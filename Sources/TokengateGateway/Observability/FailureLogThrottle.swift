//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import TokengateHTTP

/// When a failure that repeats gets a log line: the first one at once, then at most one line per ``interval``
/// carrying the number of failures since the last line, and one line when the thing works again.
///
/// A backend that is down fails every request's connect: one warning each was a thousand lines in three
/// seconds at 300 requests a second, burying the line that said why. A value, with the clock passed in, so
/// its rules are tested without waiting; the caller keeps it wherever its locking says (one per upstream
/// target, see ``UpstreamConnectFailureLog``). Public for the `tokengate` executable's snapshot cache file, whose
/// write failures repeat every second the same way.
///
/// Lines of both kinds share the interval, so a target that alternates between working and failing gets at
/// most about two lines per interval. A failure held back this way is reported by the next line of either
/// kind: the next failure line once the interval has passed, or the line saying the target works again.
public struct FailureLogThrottle: Sendable {
    public let interval: TimeAmount
    /// When the last line (of either kind) was written.
    private var lastLine: NIODeadline?
    /// Failures counted since the last line.
    private var unreported = 0
    /// A failure line was written and no recovery line since: the next success is always reported.
    private var outageReported = false

    public init(interval: TimeAmount = .seconds(1)) {
        self.interval = interval
    }

    /// Counts a failure. Returns the number of failures for a line to write now (this one and those held back
    /// since the last line), or `nil` while the last line is younger than ``interval``.
    public mutating func failed(now: NIODeadline) -> Int? {
        self.unreported += 1
        if let last = self.lastLine, now - last < self.interval {
            return nil
        }
        self.lastLine = now
        self.outageReported = true
        defer { self.unreported = 0 }
        return self.unreported
    }

    /// A success. Returns the failures not yet in a line (possibly 0) when a "works again" line is due: after a
    /// failure line, always; after failures that were only counted, once the last line is ``interval`` old.
    /// `nil` when there is nothing to say (the common case: nothing failed).
    public mutating func succeeded(now: NIODeadline) -> Int? {
        guard self.outageReported || self.unreported > 0 else { return nil }
        if !self.outageReported, let last = self.lastLine, now - last < self.interval {
            return nil  // Counted failures wait for the next line.
        }
        defer {
            self.unreported = 0
            self.outageReported = false
            self.lastLine = now
        }
        return self.unreported
    }
}
