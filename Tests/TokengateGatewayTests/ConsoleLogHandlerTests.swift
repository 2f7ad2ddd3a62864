//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import Testing

@testable import TokengateGateway

/// The console format: readable by a person, and never able to drive the terminal it is read on.
@Suite struct ConsoleLogHandlerTests {
    private func line(_ message: String, _ metadata: Logger.Metadata) -> String {
        let bytes = ConsoleLogHandler.line(level: .info, message: message, metadata: metadata)
        let text = String(decoding: bytes, as: UTF8.self)
        // The timestamp (24 bytes) and a space first; the tests look at the rest.
        return String(text.dropFirst(25))
    }

    @Test func aRequestLineLeadsWithWhatWasAskedAndAnswered() {
        let text = self.line(
            "request",
            [
                "method": "GET", "path": "/api/hello", "status": "401", "reason": "no_token", "duration_us": "210",
                "client": "127.0.0.1", "route": "/api/", "user_agent": "curl/7.88.1 (x86_64)",
            ]
        )
        #expect(text == "info    request GET /api/hello 401 no_token 0.21ms client=127.0.0.1 route=/api/ user_agent=\"curl/7.88.1 (x86_64)\"\n")
    }

    @Test(arguments: [(80, "0.08ms"), (1_234, "1.23ms"), (12_345, "12.3ms"), (1_520_000, "1520ms")])
    func durationsAreMilliseconds(micros: Int, expected: String) {
        #expect(ConsoleLogHandler.milliseconds(micros) == expected)
    }

    /// ESC, a C1 CSI, a bare carriage return, a newline: written as `\xNN`, so a user agent cannot recolour the
    /// screen, move the cursor or forge a line of its own.
    @Test func controlCharactersAreWrittenEscaped() {
        let text = self.line("request", ["user_agent": "evil\u{1B}[2J\u{9B}31m\rforged\nline", "method": "GET"])
        #expect(text == #"info    request GET user_agent=evil\x1b[2J\x9b31m\x0dforged\x0aline"# + "\n", "\(text)")
        #expect(!text.dropLast().contains("\n") && !text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x9B })
    }

    @Test func otherLinesAreTheMessageAndSortedMembers() {
        #expect(self.line("listening", ["tls": "true", "address": "127.0.0.1:8443"]) == "info    listening address=127.0.0.1:8443 tls=true\n")
        #expect(self.line("x", ["empty": "", "quote": "a \"b\""]) == #"info    x empty="" quote="a \"b\"""# + "\n")
    }
}
