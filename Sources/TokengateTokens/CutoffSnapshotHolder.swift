//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics

extension CutoffSnapshot: AtomicReference {}

/// Holds the current CutoffSnapshot and swaps it atomically.
///
/// Requests call ``load()`` (a lock-free atomic read that takes a strong reference) and keep using the
/// snapshot they got; a store publishes a new snapshot with release ordering, so a reader that sees it also
/// sees its fully built contents. Old snapshots are freed when their last reader lets go.
public final class CutoffSnapshotHolder: Sendable {
    private let current: ManagedAtomic<CutoffSnapshot>

    public init(_ initial: CutoffSnapshot) {
        self.current = ManagedAtomic(initial)
    }

    /// The snapshot in force now.
    public func load() -> CutoffSnapshot {
        self.current.load(ordering: .acquiring)
    }

    /// Publishes a new snapshot.
    public func store(_ snapshot: CutoffSnapshot) {
        self.current.store(snapshot, ordering: .releasing)
    }
}
