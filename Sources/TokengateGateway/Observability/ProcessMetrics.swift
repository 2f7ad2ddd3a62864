//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Glibc
import TokengateHTTP

/// The `process_*` metrics every Prometheus client library exports, with their usual names and help texts, so
/// that the dashboards and alerts written for any exporter work: CPU time, resident and virtual memory, open
/// and allowed file descriptors, start time. Read from `/proc/self` at each scrape (a few reads of small
/// files); nothing is kept between scrapes.
package enum ProcessMetrics {
    /// What one look at `/proc/self` found; a value that could not be read is `nil` and its metric left out.
    package struct Sample: Equatable {
        package var cpuSeconds: Double?
        package var residentBytes: Int?
        package var virtualBytes: Int?
        package var openDescriptors: Int?
        package var maxDescriptors: Int?
        package var startTimeSeconds: Double?
    }

    /// The exposition text of the current sample.
    package static func exposition() -> String {
        Self.exposition(of: Self.sample())
    }

    package static func exposition(of sample: Sample) -> String {
        var text = ""
        func family(_ name: String, _ type: String, _ help: String, _ value: String?) {
            guard let value else { return }
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        family(
            "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
            sample.cpuSeconds.map { Self.decimal($0) })
        family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", sample.residentBytes.map(String.init))
        family("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", sample.virtualBytes.map(String.init))
        family("process_open_fds", "gauge", "Number of open file descriptors.", sample.openDescriptors.map(String.init))
        family("process_max_fds", "gauge", "Maximum number of open file descriptors.", sample.maxDescriptors.map(String.init))
        family(
            "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
            sample.startTimeSeconds.map { Self.decimal($0) })
        return text
    }

    package static func sample() -> Sample {
        var sample = Sample()
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        if let stat = Self.read("/proc/self/stat"), let fields = Self.statFields(stat), ticks > 0 {
            // After the command's closing parenthesis: field 3 (state) is fields[0], so field n is fields[n - 3].
            if let user = Double(fields[14 - 3]), let system = Double(fields[15 - 3]) {
                sample.cpuSeconds = (user + system) / ticks
            }
            sample.virtualBytes = Int(fields[23 - 3])
            sample.residentBytes = Int(fields[24 - 3]).map { $0 * pageSize }
            if let started = Double(fields[22 - 3]), let bootTime = Self.bootTime() {
                sample.startTimeSeconds = bootTime + started / ticks
            }
        }
        sample.openDescriptors = Self.openDescriptors()
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
            sample.maxDescriptors = Int(clamping: limit.rlim_cur)  // RLIM_INFINITY: Int.max
        }
        return sample
    }

    /// The space-separated fields of `/proc/self/stat` after the command name, which is in parentheses and may
    /// itself hold spaces and parentheses (hence the last `)`); `nil` when there are too few.
    static func statFields(_ stat: String) -> [Substring]? {
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count >= 22 ? fields : nil
    }

    /// `btime` from `/proc/stat`: the boot time, to which the process's start in ticks is relative.
    private static func bootTime() -> Double? {
        guard let stat = Self.read("/proc/stat") else { return nil }
        for line in stat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters())
        }
        return nil
    }

    /// Entries of `/proc/self/fd`, less the one the listing itself holds open.
    private static func openDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return max(0, count - 1)
    }

    /// A small file of `/proc`, whose size `stat` does not tell: read until the end.
    private static func read(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            bytes.append(contentsOf: chunk[..<count])
            if bytes.count > 1 << 20 { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A value as the exposition writes it: plain decimal, no exponent for the sizes these have.
    private static func decimal(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

extension Substring {
    fileprivate func trimmingCharacters() -> Substring {
        var text = self
        while let last = text.last, last == " " || last == "\r" { text.removeLast() }
        while let first = text.first, first == " " { text.removeFirst() }
        return text
    }
}
