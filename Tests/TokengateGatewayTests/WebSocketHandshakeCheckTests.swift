//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import Testing

@testable import TokengateGateway

/// The backend's answer to an upgrade, judged as a WebSocket client judges it (RFC 6455 §4.1).
struct WebSocketHandshakeCheckTests {
    /// RFC 6455 §1.3's own example.
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="
    static let accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

    func judge(_ head: String) -> WebSocketHandshakeCheck.Verdict {
        WebSocketHandshakeCheck(key: Self.key).judge(ByteBuffer(string: head).readableBytesView)
    }

    @Test func theAcceptValueIsRFC6455s() {
        #expect(WebSocketHandshakeCheck.accept(for: Self.key) == Self.accept)
    }

    @Test func aGood101SwitchesAndPassesOnlyTheWebSocketFields() {
        let head = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: \(Self.accept)\r\nSec-WebSocket-Protocol: chat\r\nSet-Cookie: a=b\r\n\r\nFRAME"
        let verdict = self.judge(head)
        let expected = WebSocketHandshakeCheck.Verdict.switched(
            fields: [("Sec-WebSocket-Accept", Self.accept), ("Sec-WebSocket-Protocol", "chat")],
            headLength: head.utf8.count - 5)
        #expect(verdict == expected)
    }

    @Test func a101ThatProvesNothingIsInvalid() {
        let base = "HTTP/1.1 101 Switching Protocols\r\n"
        #expect(self.judge(base + "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n")
            == .invalid("Sec-WebSocket-Accept does not match the key"))
        #expect(self.judge(base + "Upgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
            == .invalid("Sec-WebSocket-Accept does not match the key"))
        #expect(self.judge(base + "Upgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: \(Self.accept)\r\n\r\n")
            == .invalid("the 101 does not say Upgrade: websocket"))
        #expect(self.judge(base + "Upgrade: websocket\r\nSec-WebSocket-Accept: \(Self.accept)\r\n\r\n")
            == .invalid("the 101 does not list upgrade in Connection"))
        let twice = "Sec-WebSocket-Accept: \(Self.accept)\r\n"
        #expect(self.judge(base + "Upgrade: websocket\r\nConnection: Upgrade\r\n" + twice + twice + "\r\n")
            == .invalid("Sec-WebSocket-Accept does not match the key"))
    }

    @Test func otherAnswersAndPartialHeads() {
        #expect(self.judge("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n") == .refused(status: 403))
        #expect(self.judge("HTTP/1.1 101 Switching") == .needMore)
        #expect(self.judge(String(repeating: "x", count: 17 * 1024)) == .invalid("the response head is larger than 16 KiB"))
        #expect(self.judge("SSH-2.0-OpenSSH\r\n\r\n") == .invalid("malformed status line"))
    }
}
