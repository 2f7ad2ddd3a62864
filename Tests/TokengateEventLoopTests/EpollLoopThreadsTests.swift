//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Synchronization
import Testing
import TokengateEventLoop

#if canImport(Glibc)
import Glibc
#endif

/// The data plane's threads: each loop runs on a thread of its own, work submitted from other threads runs
/// there exactly once and in order, pinning binds each loop's thread to one CPU, and a stop ends them all.
@Suite struct EpollLoopThreadsTests {
    /// What work items saw, from whichever thread they ran on.
    final class Record: Sendable {
        let entries = Mutex<[(loop: Int, thread: pthread_t, cpus: Int?)]>([])
        let counts = Mutex<[Int]>([0, 0])
        let order = Mutex<[Int]>([])
    }

    @Test func eachLoopRunsOnAThreadOfItsOwn() throws {
        let threads = try EpollLoopThreads(count: 2, pinned: false)
        let record = Record()
        for index in 0..<threads.count {
            threads.submit(toLoop: index) { _ in
                record.entries.withLock { $0.append((index, pthread_self(), CPUAffinity.currentThreadCPUCount())) }
            }
        }
        let errors = threads.stopAndJoin()
        #expect(errors.isEmpty)
        let entries = record.entries.withLock { $0 }
        #expect(entries.count == 2)
        #expect(Set(entries.map(\.loop)) == [0, 1])
        #expect(entries[0].thread != entries[1].thread)
        #expect(!entries.contains { pthread_equal($0.thread, pthread_self()) != 0 })
        #expect(threads.stopAndJoin().isEmpty)
    }

    @Test func pinnedLoopsRunOnOneCPUEach() throws {
        let threads = try EpollLoopThreads(count: 2, pinned: true)
        let record = Record()
        for index in 0..<threads.count {
            threads.submit(toLoop: index) { _ in
                record.entries.withLock { $0.append((index, pthread_self(), CPUAffinity.currentThreadCPUCount())) }
            }
        }
        threads.stopAndJoin()
        let entries = record.entries.withLock { $0 }
        #expect(entries.count == 2)
        #expect(entries.allSatisfy { $0.cpus == 1 })
        // The thread that made them is not pinned.
        #expect(CPUAffinity.currentThreadCPUCount() != nil)
    }

    @Test func workFromManyThreadsRunsExactlyOnceInSubmissionOrder() throws {
        let threads = try EpollLoopThreads(count: 2, pinned: false)
        let record = Record()
        let submitters = 4
        let perSubmitter = 1000
        final class Submitter: @unchecked Sendable {
            let threads: EpollLoopThreads
            let record: Record
            let base: Int
            let count: Int
            init(threads: EpollLoopThreads, record: Record, base: Int, count: Int) {
                (self.threads, self.record, self.base, self.count) = (threads, record, base, count)
            }
            func run() {
                for item in 0..<self.count {
                    let loop = item % 2
                    let record = self.record
                    let value = self.base + item
                    self.threads.submit(toLoop: loop) { _ in
                        record.counts.withLock { $0[loop] += 1 }
                        if value < 1000 { record.order.withLock { $0.append(value) } }
                    }
                }
            }
        }
        var handles: [pthread_t] = []
        for submitter in 0..<submitters {
            let context = Unmanaged.passRetained(
                Submitter(threads: threads, record: record, base: submitter * perSubmitter, count: perSubmitter))
            var thread = pthread_t()
            let created = pthread_create(
                &thread, nil,
                { context in
                    Unmanaged<Submitter>.fromOpaque(context!).takeRetainedValue().run()
                    return nil
                }, context.toOpaque())
            #expect(created == 0)
            if created == 0 { handles.append(thread) } else { context.release() }
        }
        for handle in handles { pthread_join(handle, nil) }
        threads.stopAndJoin()
        let counts = record.counts.withLock { $0 }
        #expect(counts == [submitters * perSubmitter / 2, submitters * perSubmitter / 2])
        // The first submitter's items, split over two loops: each loop ran its share in submission order.
        let order = record.order.withLock { $0 }
        #expect(order.count == perSubmitter)
        #expect(order.filter { $0 % 2 == 0 } == Array(stride(from: 0, to: perSubmitter, by: 2)))
        #expect(order.filter { $0 % 2 == 1 } == Array(stride(from: 1, to: perSubmitter, by: 2)))
    }

    @Test func aLoopStoppedFromItsOwnWorkEndsItsThread() throws {
        let threads = try EpollLoopThreads(count: 1, pinned: false)
        let record = Record()
        threads.submit(toLoop: 0) { loop in
            record.counts.withLock { $0[0] += 1 }
            loop.stop()
        }
        // The loop has stopped by itself: the join must still return, and the stop it sends finds no loop.
        let errors = threads.stopAndJoin()
        #expect(errors.isEmpty)
        #expect(record.counts.withLock { $0[0] } == 1)
    }
}
