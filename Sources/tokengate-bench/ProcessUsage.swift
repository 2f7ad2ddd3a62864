//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A process's CPU time and memory from /proc (Linux), sampled before and after a run so that the gateway's
/// CPU per request can be computed.
struct ProcessUsage: Sendable, Codable {
    /// User + system CPU time of all its threads, in microseconds (resolution: one clock tick, usually 10 ms).
    let cpuMicros: UInt64
    /// Resident set size now, KiB (`VmRSS`).
    let rssKiB: UInt64
    /// Peak resident set size, KiB (`VmHWM`).
    let peakRSSKiB: UInt64

    /// - Parameter pid: a process id, or nil for this process.
    static func sample(pid: Int32?) throws -> ProcessUsage {
        let base = pid.map { "/proc/\($0)" } ?? "/proc/self"
        guard let stat = try? String(contentsOfFile: base + "/stat", encoding: .utf8),
            let status = try? String(contentsOfFile: base + "/status", encoding: .utf8)
        else {
            throw BenchError("no_process", "cannot read \(base)/stat and status (is the pid right, is this Linux?)")
        }
        // The command name (field 2) is in parentheses and may contain spaces: count fields after the last ')'.
        guard let close = stat.lastIndex(of: ")") else {
            throw BenchError("bad_proc", "\(base)/stat has no command field")
        }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else {
            throw BenchError("bad_proc", "\(base)/stat: unexpected layout")
        }
        let ticks = UInt64(max(sysconf(Int32(_SC_CLK_TCK)), 1))
        return ProcessUsage(
            cpuMicros: (user + system) * 1_000_000 / ticks,
            rssKiB: Self.kibibytes("VmRSS:", in: status),
            peakRSSKiB: Self.kibibytes("VmHWM:", in: status)
        )
    }

    private static func kibibytes(_ name: String, in status: String) -> UInt64 {
        for line in status.split(separator: "\n") where line.hasPrefix(name) {
            return line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { UInt64($0) } ?? 0
        }
        return 0
    }
}
