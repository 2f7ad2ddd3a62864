//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// One reading of a process's memory from `/proc/PID/status` (Linux), for `tokengate-bench idle`.
///
/// `VmRSS` is what the issue asks for; `RssAnon` leaves out file-backed pages (the binary's code and the
/// shared libraries, which are faulted in once, not per connection), so its delta is the cleaner
/// per-connection figure. Both are reported.
struct GatewayMemory: Sendable, Codable {
    /// Resident set size, KiB (`VmRSS`).
    let rssKiB: UInt64
    /// Resident anonymous memory, KiB (`RssAnon`): the heap, thread stacks, malloc arenas.
    let anonKiB: UInt64
    /// Resident file-backed memory, KiB (`RssFile`).
    let fileKiB: UInt64
    /// Peak resident set size so far, KiB (`VmHWM`).
    let peakKiB: UInt64

    /// Spelled out: the JSON report's snake_case conversion would turn `rssKiB` into `rss_ki_b`.
    enum CodingKeys: String, CodingKey {
        case rssKiB = "rss_kib"
        case anonKiB = "anon_kib"
        case fileKiB = "file_kib"
        case peakKiB = "peak_kib"
    }

    static func sample(pid: Int32) throws -> GatewayMemory {
        let path = "/proc/\(pid)/status"
        guard let status = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw BenchError("no_process", "cannot read \(path) (is the pid right, is this Linux?)")
        }
        var fields: [Substring: UInt64] = [:]
        for line in status.split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon]
            guard name == "VmRSS" || name == "RssAnon" || name == "RssFile" || name == "VmHWM" else { continue }
            let value = line[line.index(after: colon)...].split(whereSeparator: { $0 == " " || $0 == "\t" }).first
            fields[name] = value.flatMap { UInt64($0) }
        }
        guard let rss = fields["VmRSS"], let anon = fields["RssAnon"], let file = fields["RssFile"] else {
            throw BenchError("bad_proc", "\(path) has no VmRSS/RssAnon/RssFile (a kernel thread or a zombie?)")
        }
        return GatewayMemory(rssKiB: rss, anonKiB: anon, fileKiB: file, peakKiB: fields["VmHWM"] ?? 0)
    }
}
