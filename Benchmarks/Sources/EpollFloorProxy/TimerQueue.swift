//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The pending ``LoopTimer``s of one loop, earliest first: a binary min-heap in one array.
///
/// Push and pop are O(log n) and allocate only when the array grows. Timers that are no longer wanted stay until
/// they are due (see ``LoopTimer``), so the queue holds at most one entry per armed deadline while it runs.
struct TimerQueue {
    private var heap: [LoopTimer] = []

    var isEmpty: Bool { self.heap.isEmpty }

    /// The earliest deadline, if any.
    var nextDeadline: UInt64? { self.heap.first?.deadline }

    mutating func push(_ timer: LoopTimer) {
        self.heap.append(timer)
        var child = self.heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard self.heap[child].deadline < self.heap[parent].deadline else { break }
            self.heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest timer if it is due at `now`.
    mutating func popDue(now: UInt64) -> LoopTimer? {
        guard let first = self.heap.first, first.deadline <= now else { return nil }
        let last = self.heap.removeLast()
        guard !self.heap.isEmpty else { return first }
        self.heap[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < self.heap.count else { break }
            let right = left + 1
            let smaller = right < self.heap.count && self.heap[right].deadline < self.heap[left].deadline ? right : left
            guard self.heap[smaller].deadline < self.heap[parent].deadline else { break }
            self.heap.swapAt(smaller, parent)
            parent = smaller
        }
        return first
    }
}
