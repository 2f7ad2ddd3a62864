//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Glibc
import TokengateHTTP

/// Writes log lines to standard output from a thread of its own, so that a reader that stops reading
/// (journald or a container's log driver backing up, a pipe nobody drains) never stops the gateway.
///
/// Lines queue in memory, up to a capacity (4 MiB for standard output); the writer thread takes everything queued at once and
/// writes it with blocking `write(2)`s, in order. While the queue is full, new lines are dropped and
/// counted, and once the writer catches up a `log lines dropped` line says how many went. Before, each line
/// was written by the thread that logged it, under a lock: a full pipe blocked that `write`, and with it
/// the event loop that logged (an access-log line is written for every request) and every other thread
/// waiting for the lock — requests, `/healthz` and all.
///
/// Lines still queued when the process exits are written by ``flush(timeout:)``, which the executable
/// calls on every way out; a process killed with SIGKILL loses what was queued (normally nothing: the
/// writer wakes for each line).
public final class LogLineWriter: @unchecked Sendable {
    // @unchecked: every stored property is guarded by `condition`.

    /// The writer every ``JSONLogHandler`` uses: standard output.
    public static let standardOutput = LogLineWriter(descriptor: STDOUT_FILENO)

    /// Bytes queued before lines are dropped: 4 MiB for standard output.
    private let capacity: Int
    private let descriptor: CInt
    /// How long the writer lets lines gather after a wake-up (a line reaches the output at most this much later).
    static let batchWindowMicroseconds: UInt32 = 2_000
    private let condition = NSCondition()
    private var queued: [UInt8] = []
    private var dropped = 0
    /// The writer thread holds a batch it has not finished writing.
    private var writing = false
    private var started = false

    init(descriptor: CInt, capacity: Int = 4 << 20) {
        self.descriptor = descriptor
        self.capacity = capacity
    }

    /// Queues `line` (one complete line, newline included), or drops it when the queue is full.
    func write(_ line: String) {
        var line = line
        line.withUTF8 { self.enqueue(UnsafeRawBufferPointer($0)) }
    }

    /// Queues `line` (one complete line's UTF-8, newline included), or drops it when the queue is full.
    func write(_ line: [UInt8]) {
        line.withUnsafeBytes { self.enqueue($0) }
    }

    private func enqueue(_ bytes: UnsafeRawBufferPointer) {
        self.condition.lock()
        defer { self.condition.unlock() }
        if !self.started {
            self.started = true
            let thread = Thread { self.run() }
            thread.name = "tokengate-log"
            thread.start()
        }
        guard self.queued.count + bytes.count <= self.capacity else {
            self.dropped += 1
            return
        }
        // Only a queue that was empty has a writer asleep on it; otherwise the writer takes this line with the
        // ones before it. (A wake-up per line cost two context switches a line on a pinned core: about 30 %
        // of the requests per second with the access log on.)
        let wasEmpty = self.queued.isEmpty
        self.queued.append(contentsOf: bytes)
        if wasEmpty {
            self.condition.broadcast()  // The writer, and a flush() that may be waiting too.
        }
    }

    /// Waits until every queued line is written, or `timeout` passes (a reader that never reads).
    public func flush(timeout: TimeInterval = 2) {
        let deadline = Date(timeIntervalSinceNow: timeout)
        self.condition.lock()
        defer { self.condition.unlock() }
        while (!self.queued.isEmpty || self.writing || self.dropped > 0) && self.started {
            guard self.condition.wait(until: deadline) else { return }
        }
    }

    private func run() {
        var batch: [UInt8] = []
        while true {
            self.condition.lock()
            self.writing = false
            self.condition.broadcast()  // for flush()
            while self.queued.isEmpty && self.dropped == 0 {
                self.condition.wait()
            }
            // Woken by the first line after a quiet spell: let the lines of the next moment join it, so a busy
            // gateway pays one wake-up and one write per batch rather than per line.
            self.condition.unlock()
            usleep(Self.batchWindowMicroseconds)
            self.condition.lock()
            if self.dropped > 0 {
                // Said before the lines queued after the drop, which are newer.
                batch.append(contentsOf: Self.droppedLine(self.dropped).utf8)
                self.dropped = 0
            }
            batch.append(contentsOf: self.queued)
            self.queued.removeAll(keepingCapacity: self.queued.capacity <= 64 << 10)
            self.writing = true
            self.condition.unlock()
            batch.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = Glibc.write(self.descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0, errno == EINTR { continue }
                    if written <= 0 { break }  // Standard output is gone: nothing to do but drop.
                    offset += written
                }
            }
            batch.removeAll(keepingCapacity: batch.capacity <= 64 << 10)
        }
    }

    private static func droppedLine(_ count: Int) -> String {
        "{\"ts\":\"\(LogTimestamp.now())\",\"level\":\"warning\",\"label\":\"tokengate\","
            + "\"msg\":\"log lines dropped: standard output was not read fast enough\",\"dropped\":\"\(count)\"}\n"
    }
}
