//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateGateway

/// Log lines reach a pipe in order from the writer's thread; when nobody reads the pipe, logging neither
/// blocks nor grows without bound, and the lines that could not be kept are counted in one line.
@Suite struct LogLineWriterTests {
    @Test func aPipeNobodyReadsNeverBlocksTheLoggerAndDropsAreReported() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = LogLineWriter(descriptor: ends[1], capacity: 4096)
        let line = "{\"msg\":\"" + String(repeating: "x", count: 90) + "\"}\n"  // 100 bytes
        // 5,000 lines (500 KB) are more than the pipe (64 KiB) and the 4 KiB queue hold together.
        let started = ContinuousClock.now
        for _ in 0..<5_000 { writer.write(line) }
        #expect(ContinuousClock.now - started < .seconds(2), "writing must not wait for the reader")

        // Drain the pipe until the writer has caught up; then the dropped count comes before newer lines.
        let readEnd = ends[0]
        let reader = Task.detached { () -> String in
            var text: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(readEnd, &buffer, buffer.count)
                if count <= 0 { break }
                text += buffer[0..<count]
                if String(decoding: text, as: UTF8.self).contains("\"msg\":\"after\"") { break }
            }
            return String(decoding: text, as: UTF8.self)
        }
        try await Task.sleep(for: .milliseconds(100))
        writer.write("{\"msg\":\"after\"}\n")
        writer.flush(timeout: 5)
        let text = await reader.value
        close(ends[1])
        let lines = text.split(separator: "\n")
        let kept = lines.filter { $0 == line.dropLast() }.count
        // One line per episode: the writer may catch up (and say so) more than once while lines pour in.
        let droppedLines = lines.filter { $0.contains("log lines dropped") }
        try #require(!droppedLines.isEmpty, "\(lines.count) lines")
        let dropped = droppedLines.map { Int($0.split(separator: "\"dropped\":\"").last!.prefix { $0.isNumber })! }.reduce(0, +)
        #expect(kept + dropped == 5_000, "kept \(kept), dropped \(dropped)")
        #expect(dropped > 0 && kept > 0)
        #expect(lines.last == "{\"msg\":\"after\"}")
        #expect(lines.firstIndex { $0.contains("log lines dropped") }! < lines.count - 1)
    }
}
