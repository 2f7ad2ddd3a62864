//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Rate limits on the HTTP/2 frames that cost the gateway work but give a client nothing it could not get
/// more cheaply, and on the stream resets the gateway itself is made to send.
///
/// ### Overview
/// libnghttp2 1.52 (Debian's, with the backported fixes) already bounds rapid client resets, CONTINUATION
/// floods, SETTINGS entries and the queue of PING/SETTINGS acknowledgements a client does not read. What it
/// does not bound is a client that *does* read: it can send empty DATA frames, WINDOW_UPDATEs, PINGs,
/// SETTINGS and PRIORITY frames as fast as the link allows, and each one costs a parse, a callback and
/// often an answer. It can also provoke RST_STREAMs from the server (a WINDOW_UPDATE of 0 on a stream,
/// DATA beyond a declared content-length, …): the stream is closed at the protocol level, no longer counts
/// against SETTINGS_MAX_CONCURRENT_STREAMS, yet the work started for it may still run ("MadeYouReset",
/// CVE-2025-8671).
///
/// ### Function
/// Each kind of frame drains its own token bucket: `burst` tokens at most, refilled at `perSecond`. An
/// event that finds its bucket empty makes ``record(_:now:)`` return `.enhanceYourCalm`, and the codec
/// answers with GOAWAY ENHANCE_YOUR_CALM and closes. WINDOW_UPDATE tokens are also *earned*: every
/// non-empty DATA frame the gateway sends entitles the client to two more (one for the stream, one for the
/// connection), so a long download never trips the limit however slowly time passes.
///
/// ### Implementation
/// A plain value with no clock of its own: the caller passes `now`, so the event loop's clock in
/// production and a fixed sequence of instants in tests. Tokens are kept in billionths so the refill is
/// exact integer arithmetic (no floating-point drift between two runs of the same test).
package struct HTTP2DoSHeuristics: Sendable {
    /// The frame kinds that are rate-limited.
    package enum Event: Sendable, Hashable, CaseIterable {
        /// A DATA frame with no payload and no END_STREAM flag.
        case emptyData
        case windowUpdate
        /// A PING that is not an acknowledgement.
        case ping
        /// SETTINGS (not an acknowledgement) and PRIORITY frames.
        case settingsOrPriority
        /// An RST_STREAM the gateway sent with an error code other than NO_ERROR.
        case serverReset
        /// A request header list (or trailer list) over the size limit. Each costs a decode of up to twice
        /// the limit before the stream is refused (``HTTP2RequestHeadBuilder/resetLimit``) and is never a
        /// request the gateway can serve: a client that keeps sending them is a bomb, not a mistake.
        case oversizedHeaderList
        /// An RST_STREAM from the client (rapid reset, CVE-2023-44487: each stream's work starts and is thrown
        /// away at once, and never counts against the concurrent stream limit). nghttp2 has a limit of its
        /// own, but it ends the connection with GOAWAY INTERNAL_ERROR and tells the codec nothing; this one
        /// is stricter (burst 500 < 1000, refill 30/s < 33/s), so it trips first for any sustained rate over
        /// nghttp2's: ENHANCE_YOUR_CALM and the flood warning.
        case clientReset
    }

    /// What the codec must do after an event.
    package enum Verdict: Sendable, Hashable {
        case proceed
        /// Close the connection with GOAWAY ENHANCE_YOUR_CALM; `event` is the limit that tripped (for logs).
        case enhanceYourCalm(Event)
    }

    /// One token bucket's size and refill rate.
    package struct RateLimit: Sendable, Hashable {
        package var burst: Int
        package var perSecond: Int

        package init(burst: Int, perSecond: Int) {
            precondition(burst >= 1 && burst <= 1_000_000, "a burst must be 1…1,000,000")
            precondition(perSecond >= 0 && perSecond <= 1_000_000, "a rate must be 0…1,000,000 per second")
            self.burst = burst
            self.perSecond = perSecond
        }
    }

    /// All the limits. The defaults leave browsers, curl, gRPC keepalives and load generators well clear:
    /// they send a handful of PRIORITY/SETTINGS frames at the start, a PING now and then, and one
    /// WINDOW_UPDATE per half window consumed.
    package struct Limits: Sendable, Hashable {
        package var emptyData = RateLimit(burst: 16, perSecond: 4)
        package var windowUpdate = RateLimit(burst: 200, perSecond: 50)
        package var ping = RateLimit(burst: 20, perSecond: 5)
        package var settingsOrPriority = RateLimit(burst: 200, perSecond: 50)
        package var serverReset = RateLimit(burst: 100, perSecond: 10)
        package var oversizedHeaderList = RateLimit(burst: 10, perSecond: 1)
        package var clientReset = RateLimit(burst: 500, perSecond: 30)
        /// WINDOW_UPDATE tokens earned per non-empty DATA frame sent.
        package var windowUpdatesPerDataFrameSent = 2

        package init() {}

        package func limit(for event: Event) -> RateLimit {
            switch event {
            case .emptyData: self.emptyData
            case .windowUpdate: self.windowUpdate
            case .ping: self.ping
            case .settingsOrPriority: self.settingsOrPriority
            case .serverReset: self.serverReset
            case .oversizedHeaderList: self.oversizedHeaderList
            case .clientReset: self.clientReset
            }
        }
    }

    /// A token bucket with tokens counted in billionths.
    private struct Bucket: Sendable {
        static let scale: Int64 = 1_000_000_000
        let capacity: Int64
        let perSecond: Int64
        var tokens: Int64
        var last: NIODeadline

        init(_ limit: RateLimit, now: NIODeadline) {
            self.capacity = Int64(limit.burst) * Self.scale
            self.perSecond = Int64(limit.perSecond)
            self.tokens = self.capacity
            self.last = now
        }

        /// Refills for the time since the last call, then takes one token if there is one.
        mutating func take(now: NIODeadline) -> Bool {
            self.refill(now: now)
            guard self.tokens >= Self.scale else { return false }
            self.tokens -= Self.scale
            return true
        }

        mutating func add(_ count: Int, now: NIODeadline) {
            self.refill(now: now)
            self.tokens = min(self.capacity, self.tokens + Int64(count) * Self.scale)
        }

        private mutating func refill(now: NIODeadline) {
            guard now > self.last else { return }  // A clock that went backwards refills nothing.
            // Time past a full refill changes nothing; clamping first keeps the product far from overflow
            // (at most 1,000,000 tokens × 1e9 scale = 1e15).
            let elapsed = (now - self.last).nanoseconds
            self.last = now
            guard self.perSecond > 0 else { return }
            let fullRefill = self.capacity / self.perSecond + 1  // nanoseconds for a full bucket
            let refill = min(elapsed, fullRefill) * self.perSecond
            self.tokens = min(self.capacity, self.tokens + refill)
        }
    }

    package let limits: Limits
    private var buckets: [Bucket]

    /// - Parameter now: the connection's start; every bucket starts full.
    package init(limits: Limits = Limits(), now: NIODeadline) {
        self.limits = limits
        self.buckets = Event.allCases.map { Bucket(limits.limit(for: $0), now: now) }
    }

    /// Counts one `event` at `now`.
    package mutating func record(_ event: Event, now: NIODeadline) -> Verdict {
        let index = Self.index(event)
        return self.buckets[index].take(now: now) ? .proceed : .enhanceYourCalm(event)
    }

    /// The gateway sent a DATA frame with a payload: the client may now acknowledge it with WINDOW_UPDATEs.
    package mutating func sentDataFrame(now: NIODeadline) {
        self.buckets[Self.index(.windowUpdate)].add(self.limits.windowUpdatesPerDataFrameSent, now: now)
    }

    private static func index(_ event: Event) -> Int {
        switch event {
        case .emptyData: 0
        case .windowUpdate: 1
        case .ping: 2
        case .settingsOrPriority: 3
        case .serverReset: 4
        case .oversizedHeaderList: 5
        case .clientReset: 6
        }
    }
}
