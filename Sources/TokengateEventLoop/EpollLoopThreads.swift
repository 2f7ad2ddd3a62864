//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The data plane's threads: `event_loops` of them, each running one ``EpollEventLoop`` until stopped, each
/// optionally pinned to its own CPU (`pin_event_loops`).
///
/// A loop and everything registered with it belong to its thread; the only way in from outside is the loop's
/// ``LoopInbox`` (``submit(toLoop:_:)``), used to set listeners up, hand over a reload's generation, start a
/// drain and stop. Connections never move between loops: each loop accepts on a listener of its own
/// (``Socket/listen(on:backlog:reusePort:)``).
public final class EpollLoopThreads: Sendable {
    /// What a loop's thread reported once it was running (or why it could not start).
    private final class Start: @unchecked Sendable {
        let index: Int
        let cpu: Int?
        let ready = Mutex<Result<LoopInbox, SystemCallError>?>(nil)
        let finished = Mutex<SystemCallError?>(nil)

        init(index: Int, cpu: Int?) {
            self.index = index
            self.cpu = cpu
        }

        /// The thread's body: pin, make the loop and its inbox, report, run until stopped.
        func run() {
            let loop: EpollEventLoop
            let inbox: LoopInbox
            do throws(SystemCallError) {
                if let cpu = self.cpu { try CPUAffinity.pinCurrentThread(to: cpu) }
                loop = try EpollEventLoop()
                inbox = try LoopInbox(loop: loop)
            } catch {
                self.ready.withLock { $0 = .failure(error) }
                return
            }
            self.ready.withLock { $0 = .success(inbox) }
            do throws(SystemCallError) {
                try withExtendedLifetime(inbox) { () throws(SystemCallError) in try loop.run() }
            } catch {
                self.finished.withLock { $0 = error }
            }
        }
    }

    private let inboxes: [LoopInbox]
    private let threads: Mutex<[pthread_t]?>
    private let starts: [Start]

    public var count: Int { self.inboxes.count }

    /// Starts `count` threads, each with its loop running, and returns once all of them are.
    ///
    /// - Parameter pinned: bind loop `i` to the `i`-th CPU this process may use (wrapping around when there
    ///   are more loops than CPUs).
    /// - Throws: the first thread's failure (pinning refused, no memory for epoll); the threads that did start
    ///   are stopped and joined first.
    public init(count: Int, pinned: Bool) throws(SystemCallError) {
        precondition(count > 0, "at least one event loop")
        let cpus = pinned ? (0..<1024).filter(CPUAffinity.currentThreadMayRun(on:)) : []
        if pinned, cpus.isEmpty { throw SystemCallError("sched_getaffinity", code: EINVAL) }
        let starts = (0..<count).map { Start(index: $0, cpu: pinned ? cpus[$0 % cpus.count] : nil) }
        var threads: [pthread_t] = []
        var failure: SystemCallError?
        for start in starts {
            var thread = pthread_t()
            let context = Unmanaged.passRetained(start).toOpaque()
            let created = pthread_create(
                &thread, nil,
                { context in
                    let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
                    start.run()
                    return nil
                }, context)
            guard created == 0 else {
                Unmanaged<Start>.fromOpaque(context).release()
                failure = SystemCallError("pthread_create", code: created)
                break
            }
            threads.append(thread)
        }
        // Wait for every started thread to report: a loop must exist before work can be submitted to it.
        var inboxes: [LoopInbox] = []
        for start in starts.prefix(threads.count) {
            while true {
                let result = start.ready.withLock { $0 }
                if let result {
                    switch result {
                    case .success(let inbox): inboxes.append(inbox)
                    case .failure(let error): failure = failure ?? error
                    }
                    break
                }
                sched_yield()
            }
        }
        if let failure {
            for inbox in inboxes { inbox.submit { $0.stop() } }
            for thread in threads { pthread_join(thread, nil) }
            throw failure
        }
        self.inboxes = inboxes
        self.starts = starts
        self.threads = Mutex(threads)
    }

    /// Runs `work` on loop `index`'s thread, during one of its next ticks.
    public func submit(toLoop index: Int, _ work: @escaping LoopInbox.Work) {
        self.inboxes[index].submit(work)
    }

    /// Asks every loop to stop after its current tick and waits for all threads to end. Work submitted
    /// before runs first. Returns the failures of loops that ended on their own (a failed `epoll_wait`).
    /// A second call returns at once.
    @discardableResult
    public func stopAndJoin() -> [SystemCallError] {
        guard let threads = self.threads.withLock({ $0.take() }) else { return [] }
        for inbox in self.inboxes { inbox.submit { $0.stop() } }
        for thread in threads { pthread_join(thread, nil) }
        return self.starts.compactMap { start in start.finished.withLock { $0 } }
    }

    deinit {
        self.stopAndJoin()
    }
}
