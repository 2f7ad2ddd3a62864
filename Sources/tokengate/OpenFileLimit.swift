//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// The process's open-file limit, raised at start as far as it may go.
///
/// Each proxied request holds a client and a backend connection, so `limits.max_connections` needs about
/// twice as many descriptors. The soft limit is often 1024 (a login shell, a container runtime's default)
/// under a hard limit far higher: the gateway would run out of descriptors at a few hundred clients, with
/// the default `max_connections` of 10,000. Raising the soft limit to the hard one is what the process may
/// do by itself (as nginx's `worker_rlimit_nofile` and Go's runtime do); what is still short is reported.
enum OpenFileLimit {
    /// Raises the soft limit to the hard one and returns what to log: the change, and a warning when the
    /// limit is still below what `maxConnections` needs.
    static func raise(forConnections maxConnections: Int) -> (info: String?, warning: String?) {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return (nil, nil) }
        var info: String?
        if limit.rlim_cur < limit.rlim_max {
            let before = limit.rlim_cur
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 {
                limit = raised
                info = "raised the open-file limit from \(before) to \(limit.rlim_cur)"
            }
        }
        let needed = rlim_t(2 * maxConnections + 64)
        guard limit.rlim_cur < needed else { return (info, nil) }
        return (
            info,
            "the open-file limit is \(limit.rlim_cur), and limits.max_connections \(maxConnections) needs about \(needed) "
                + "(a client and a backend connection each, and some to spare): raise LimitNOFILE (systemd), "
                + "ulimit -n or the container's nofile limit, or lower max_connections"
        )
    }
}
