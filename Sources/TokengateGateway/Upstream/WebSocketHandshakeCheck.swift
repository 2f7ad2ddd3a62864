//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
import Foundation
import NIOCore

/// Reads a backend's answer to a WebSocket upgrade and judges it (RFC 6455 §4.1, the client's checks): a
/// `101` with `Upgrade: websocket`, `Connection: upgrade` and the `Sec-WebSocket-Accept` the key calls for,
/// and a head within ``maxHeadBytes``. The gateway is the client here: a backend that switches protocols
/// without proving it read this upgrade (a cached or injected `101`, an HTTP server that does not speak
/// WebSocket at all) gets no tunnel, and the client a 502 instead of a connection to something else.
struct WebSocketHandshakeCheck {
    static let maxHeadBytes = 16 * 1024
    static let maxFields = 100
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    enum Verdict: Equatable {
        /// More bytes are needed for the head.
        case needMore
        /// The backend switched: `fields` are the lines of its head the client gets (`Sec-WebSocket-Protocol`,
        /// `Sec-WebSocket-Extensions` and the accept value), `headLength` where the tunnel's bytes start.
        case switched(fields: [(String, String)], headLength: Int)
        /// The backend answered the upgrade with another status: no tunnel.
        case refused(status: Int)
        /// A `101` or a head that breaks the rules: the reason, for the log and the 502.
        case invalid(String)

        static func == (lhs: Verdict, rhs: Verdict) -> Bool {
            switch (lhs, rhs) {
            case (.needMore, .needMore): true
            case (.switched(let a, let x), .switched(let b, let y)):
                x == y && a.map { $0.0 + ":" + $0.1 } == b.map { $0.0 + ":" + $0.1 }
            case (.refused(let a), .refused(let b)): a == b
            case (.invalid(let a), .invalid(let b)): a == b
            default: false
            }
        }
    }

    let expectedAccept: String

    init(key: String) {
        self.expectedAccept = Self.accept(for: key)
    }

    /// `base64(SHA-1(key + GUID))` (RFC 6455 §4.2.2 item 5.4).
    static func accept(for key: String) -> String {
        let input = Array((key + Self.guid).utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        let ok = input.withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, EVP_sha1(), nil)
            }
        }
        precondition(ok == 1 && length == 20, "SHA-1 is part of every OpenSSL 3")
        return Data(digest).base64EncodedString()
    }

    /// Judges the bytes received so far (from their start).
    func judge(_ bytes: ByteBufferView) -> Verdict {
        guard let end = Self.headEnd(bytes) else {
            return bytes.count >= Self.maxHeadBytes ? .invalid("the response head is larger than 16 KiB") : .needMore
        }
        guard end <= Self.maxHeadBytes else { return .invalid("the response head is larger than 16 KiB") }
        let head = bytes[bytes.startIndex..<(bytes.startIndex + end)]
        guard let text = String(bytes: head, encoding: .isoLatin1) else { return .invalid("unreadable head") }
        var lines = text.components(separatedBy: "\r\n")
        while lines.last == "" { lines.removeLast() }
        guard let statusLine = lines.first else { return .invalid("no status line") }
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0", parts[1].utf8.count == 3,
            let status = Int(parts[1])
        else {
            return .invalid("malformed status line")
        }
        guard status == 101 else { return .refused(status: status) }
        guard parts[0] == "HTTP/1.1" else { return .invalid("a 101 over HTTP/1.0") }
        guard lines.count - 1 <= Self.maxFields else { return .invalid("more than \(Self.maxFields) fields") }
        var upgrade: [String] = []
        var connection: [String] = []
        var accepts: [String] = []
        var passed: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { return .invalid("a field line without a colon") }
            let name = String(line[..<colon])
            guard !name.isEmpty, name.utf8.allSatisfy({ Self.isTokenByte($0) }) else {
                return .invalid("a malformed field name")
            }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            guard !value.utf8.contains(where: { $0 < 0x20 && $0 != 0x09 || $0 == 0x7F }) else {
                return .invalid("a control byte in a field value")
            }
            switch name.lowercased() {
            case "upgrade": upgrade.append(value)
            case "connection": connection.append(value)
            case "sec-websocket-accept": accepts.append(value)
            case "sec-websocket-protocol": passed.append(("Sec-WebSocket-Protocol", value))
            case "sec-websocket-extensions": passed.append(("Sec-WebSocket-Extensions", value))
            default: break
            }
        }
        guard WebSocketUpgradeRequest.tokens(upgrade) == ["websocket"] else {
            return .invalid("the 101 does not say Upgrade: websocket")
        }
        guard WebSocketUpgradeRequest.tokens(connection).contains("upgrade") else {
            return .invalid("the 101 does not list upgrade in Connection")
        }
        guard accepts.count == 1, Self.constantTimeEqual(accepts[0], self.expectedAccept) else {
            return .invalid("Sec-WebSocket-Accept does not match the key")
        }
        return .switched(fields: [("Sec-WebSocket-Accept", accepts[0])] + passed, headLength: end)
    }

    /// The offset just past the head's empty line, if the bytes hold one.
    static func headEnd(_ bytes: ByteBufferView) -> Int? {
        var index = bytes.startIndex
        let limit = min(bytes.endIndex, bytes.startIndex + Self.maxHeadBytes + 4)
        while index + 3 < limit {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 {
                return index + 4 - bytes.startIndex
            }
            index += 1
        }
        return nil
    }

    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let a = Array(a.utf8)
        let b = Array(b.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
