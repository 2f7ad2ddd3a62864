//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateEpoll

/// Binds an event loop's thread to one CPU (`pin_event_loops: true`).
///
/// One loop per core is the data plane's shape: a pinned loop keeps its caches (its connections' TLS state,
/// its token cache, its upstream pool) warm on one core and never migrates in the middle of a tick, which on a
/// busy machine costs a cache refill each time. It is optional because a host that shares its cores (a
/// container with a CPU quota, several services on one machine) is better served by the scheduler's choice.
public enum CPUAffinity {
    /// Binds the calling thread (only it, not the process) to `cpu`. Fails with `EINVAL` for a CPU the
    /// process may not use (outside its cgroup's or its parent's affinity mask) or that does not exist.
    public static func pinCurrentThread(to cpu: Int) throws(SystemCallError) {
        let code = CTokengateEpoll_pin_current_thread(Int32(clamping: cpu))
        guard code == 0 else { throw SystemCallError("sched_setaffinity", code: code) }
    }

    /// How many CPUs the calling thread may run on now (1 once pinned), or nil if the kernel would not say.
    public static func currentThreadCPUCount() -> Int? {
        let count = CTokengateEpoll_current_thread_cpu_count()
        return count < 0 ? nil : Int(count)
    }

    /// Whether the calling thread may run on `cpu`.
    public static func currentThreadMayRun(on cpu: Int) -> Bool {
        CTokengateEpoll_current_thread_may_run_on(Int32(clamping: cpu)) == 1
    }
}
