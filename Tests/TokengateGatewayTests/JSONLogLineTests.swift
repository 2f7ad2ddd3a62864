//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import Testing
import TokengateHTTP

@testable import TokengateGateway

/// The log line as bytes: JSON quoting, the timestamp, and the handler's line, read back with a JSON parser.
@Suite struct JSONLogLineTests {
    @Test(arguments: [
        ("", #""""#),
        ("plain /api/v1 text", #""plain /api/v1 text""#),
        ("a\"b\\c", #""a\"b\\c""#),
        ("line\nfeed\rreturn\ttab", #""line\nfeed\rreturn\ttab""#),
        ("\u{0}\u{1}\u{1F}\u{7F}", #""\u0000\u0001\u001f\u007f""#),
        ("é ü 日本 🙂", "\"é ü 日本 🙂\""),
        ("sep\u{2028}para\u{2029}end", #""sep\u2028para\u2029end""#),
        // E2 80 xx other than A8/A9 is another character (U+2026, an ellipsis), copied as it is.
        ("cut…", "\"cut…\""),
    ])
    func quotesEveryCharacterJSONNeedsEscapedAndCopiesTheRest(value: String, expected: String) throws {
        #expect(JSONString.quote(value) == expected)
        let parsed = try JSONSerialization.jsonObject(with: Data("[\(expected)]".utf8)) as? [String]
        #expect(parsed == [value], "the quoted form must read back as the value")
    }

    @Test func appendsAfterWhatTheOutputHolds() {
        var output = Array("x:".utf8)
        JSONString.append("q\"", to: &output)
        #expect(String(decoding: output, as: UTF8.self) == #"x:"q\"""#)
    }

    @Test(arguments: [
        (0, 0, "1970-01-01T00:00:00.000Z"),
        (951_782_400, 7, "2000-02-29T00:00:00.007Z"),
        (1_795_757_211, 123, "2026-11-27T05:26:51.123Z"),
        (4_102_444_799, 999, "2099-12-31T23:59:59.999Z"),
    ])
    func timestampsAreUTCToTheMillisecond(seconds: Int, milliseconds: Int, expected: String) {
        var output: [UInt8] = []
        LogTimestamp.append(seconds: seconds, milliseconds: milliseconds, to: &output)
        #expect(String(decoding: output, as: UTF8.self) == expected)
    }

    @Test func theCurrentTimestampIsNow() throws {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let stamp = LogTimestamp.now()
        let date = try #require(formatter.date(from: stamp), "\(stamp)")
        #expect(abs(date.timeIntervalSinceNow) < 5)
        #expect(stamp.utf8.count == 24)
    }

    /// A line as the access log writes it, with a value of each kind and a handler metadata member the
    /// event overrides: one JSON object, members after `msg` in key order, every value a string.
    @Test func theHandlersLineIsOneJSONObjectWithSortedMembers() async throws {
        var ends: [Int32] = [0, 0]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = LogLineWriter(descriptor: ends[1], capacity: 1 << 16)
        var handler = JSONLogHandler(label: "tokengate \"test\"", writer: writer)
        handler.logLevel = .info
        handler.metadata = ["connection": "7", "route": "handler's"]
        var logger = Logger(label: "ignored") { _ in handler }
        logger.logLevel = .info
        logger.debug("below the level")
        logger.info(
            "request",
            metadata: [
                "route": .string("/api"),
                "path": .string("/a\"b\u{1}"),
                "status": .stringConvertible(502),
                "list": .array(["x", "y"]),
                "user": .string("ünïcode"),
            ]
        )
        writer.flush(timeout: 5)
        close(ends[1])
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(ends[0], &buffer, buffer.count)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        try #require(lines.count == 2 && lines[1].isEmpty, "one line, newline-terminated: \(lines)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: String])
        #expect(object["level"] == "info")
        #expect(object["label"] == "tokengate \"test\"")
        #expect(object["msg"] == "request")
        #expect(object["route"] == "/api", "the event's member wins over the handler's")
        #expect(object["connection"] == "7")
        #expect(object["path"] == "/a\"b\u{1}")
        #expect(object["status"] == "502")
        #expect(object["list"] == #"["x", "y"]"#, "a non-string value is written as its description")
        #expect(object["user"] == "ünïcode")
        #expect(object["ts"]?.utf8.count == 24)
        let order = ["\"ts\"", "\"level\"", "\"label\"", "\"msg\"", "\"connection\"", "\"list\"", "\"path\"", "\"route\"", "\"status\"", "\"user\""]
        let positions = order.map { lines[0].range(of: $0)?.lowerBound }
        #expect(positions.allSatisfy { $0 != nil } && positions.map { $0! } == positions.map { $0! }.sorted(), "\(lines[0])")
    }
}
