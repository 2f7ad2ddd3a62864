//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A deadline for one handler, as a value: when (nanoseconds on the monotonic clock) and whom to tell.
///
/// There is no cancel: a handler that no longer cares ignores the call (its state says so), and one that was
/// closed is never called (its registration's generation changed). So arming a timer costs one heap push and no
/// allocation of its own, and nothing has to find it again. Ordered by deadline alone, for the loop's heap.
struct LoopTimer: Comparable {
    let deadline: UInt64
    let registration: LoopRegistration
    /// The handler's own tag (which of its deadlines this is).
    let tag: UInt32

    static func < (lhs: LoopTimer, rhs: LoopTimer) -> Bool {
        lhs.deadline < rhs.deadline
    }

    static func == (lhs: LoopTimer, rhs: LoopTimer) -> Bool {
        lhs.deadline == rhs.deadline
    }
}
