//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOCore
import Testing

@testable import TokengateGateway

/// What a client chose (host, user agent, the request line on the TLS port) is bounded and cleaned before the
/// log holds it; the through-the-sockets lines are in GatewayIntegrationTests+AccessLog.
@Suite struct AccessLogRecordTests {
    static let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJlLWJ5dGVz"

    @Test func aTokenInAClientValueIsReplacedAndALongOneCut() {
        #expect(AccessLogRecord.clientText("okhttp/4.12", maxBytes: 256) == "okhttp/4.12")
        #expect(AccessLogRecord.clientText("app \(Self.jwt) v2", maxBytes: 256) == "app [token] v2")
        let long = AccessLogRecord.clientText(String(repeating: "é", count: 200), maxBytes: 255)
        #expect(long.hasSuffix("…") && long.utf8.count <= 255 + "…".utf8.count && !long.contains("\u{FFFD}"), "cut on a character")
    }

    @Test func membersWithoutAValueAreLeftOut() {
        var record = AccessLogRecord(status: 426, reason: "tls_required")
        record.client = "192.0.2.1"
        record.target = "/login?password=hunter2"
        let metadata = record.metadata
        #expect(Set(metadata.keys) == ["status", "reason", "client", "path"])
        #expect(metadata["path"] == "/login", "the query never goes in")
    }

    @Test(arguments: [
        ("GET /x?q=1 HTTP/1.1\r\nHost: a\r\n\r\n", "GET", "/x?q=1", "HTTP/1.1"),
        ("POST /y HTTP/1.0\r\n", "POST", "/y", "HTTP/1.0"),
        ("GET /partial", "GET", "/partial", nil),
        ("DELETE", "DELETE", nil, nil),
        ("GET / SPDY/3\r\n", "GET", "/", nil),
    ] as [(String, String?, String?, String?)])
    func theRequestLineOnTheTLSPortIsTakenAsFarAsItLooksLikeOne(
        bytes: String, method: String?, target: String?, version: String?
    ) {
        let line = PlainHTTPOnTLSPortHandler.requestLine(.init(string: bytes))
        #expect(line.method == method && line.target == target && line.version == version, "\(line)")
    }

    @Test func bytesThatAreNoMethodGiveNothing() {
        #expect(PlainHTTPOnTLSPortHandler.requestLine(.init(string: "G3T / HTTP/1.1\r\n")).method == nil)
        #expect(PlainHTTPOnTLSPortHandler.requestLine(.init(string: "ABCDEFGHIJKLMNOPQ / HTTP/1.1\r\n")).method == nil)
    }
}
