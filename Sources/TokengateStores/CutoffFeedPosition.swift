//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A point in a store's change feed: every change the store commits gets the next number of one monotonic
/// sequence, and ``CutoffStore/changes(since:limit:)`` returns the rows changed after a position.
///
/// The numbers only mean something within one ``feed``: a store recreated, replaced by another file or restored
/// from a backup numbers its changes anew (or again), so the sync service compares the feed before it trusts a
/// sequence, and reloads everything when the feed changed or the sequence went backwards.
public struct CutoffFeedPosition: Sendable, Hashable, CustomStringConvertible {
    /// Names the numbering: the store's own random id (written when its schema was made), with whatever else
    /// tells two numberings apart (a reopened SQLite file).
    public var feed: String
    /// The last change seen: the store's change counter when the read was made.
    public var sequence: Int64

    public init(feed: String, sequence: Int64) {
        self.feed = feed
        self.sequence = sequence
    }

    public var description: String { "\(self.feed)@\(self.sequence)" }
}
