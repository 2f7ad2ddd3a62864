//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import NIOHTTP1
import Testing
import TokengateConfig
import TokengateHTTP
import TokengateHTTPTestSupport
import TokengateTokens

@testable import TokengateGateway

/// A request's fields as bytes (``RequestFields``), as the parsers leave them and as the request logic reads
/// and rewrites them.
@Suite struct RequestFieldsTests {
    private func parsed(_ head: String) throws -> ClientRequestHead {
        var parser = HTTP1RequestParser(limits: .init(maxHeadBytes: 16 * 1024, maxURIBytes: 8 * 1024))
        var buffer = ByteBuffer(string: head)
        guard case .head(let parsed) = try parser.next(from: &buffer) else {
            Issue.record("no head in \(head.debugDescription)")
            throw HTTP1ParseFailure.malformed("no head")
        }
        return parsed
    }

    /// The head a backend gets for `head` on a public route (no identity, nothing stripped).
    private func rewritten(_ head: ClientRequestHead, clientAddress: String?) throws -> String {
        let forwarding = RequestRewriter.Forwarding(clientAddress: clientAddress, requestID: "rid", scheme: "https")
        let upstream = try #require(
            RequestRewriter.upstreamHead(from: head, identity: nil, strip: nil, withheldCookies: [], newBodyLength: nil, forwarding: forwarding)
        )
        return String(buffer: upstream.bytes)
    }

    @Test func theParserKeepsTheFieldLinesAndLooksUpIgnoreCaseWithoutTheWhitespace() throws {
        let head = try self.parsed(
            "GET /a HTTP/1.1\r\nHost: api.example\r\nX-Token:   t1 \t\r\nACCEPT: */*\r\nx-token: t2\r\nEmpty:\r\n\r\n"
        )
        #expect(head.fields.count == 5)
        #expect(head.fields.bytes == Array("Host: api.example\r\nX-Token:   t1 \t\r\nACCEPT: */*\r\nx-token: t2\r\nEmpty:\r\n".utf8))
        #expect(head.fields.first(name: "host") == "api.example")
        #expect(head.fields.first(name: "accept") == "*/*")
        #expect(head.fields.values(name: "X-TOKEN") == ["t1", "t2"])
        #expect(head.fields.count(name: "x-token") == 2 && head.fields.count(name: "host") == 1 && head.fields.count(name: "nope") == 0)
        #expect(head.fields.contains(name: "empty") && head.fields.first(name: "empty") == "")
        #expect(!head.fields.contains(name: "hos") && !head.fields.contains(name: "hostx"))
        let (range, count) = try #require(head.fields.firstValueRange(name: "x-token"))
        #expect(count == 2 && Array(head.fields.bytes[range]) == Array("t1".utf8))
        #expect(head.headers == HTTPHeaders([("Host", "api.example"), ("X-Token", "t1"), ("ACCEPT", "*/*"), ("x-token", "t2"), ("Empty", "")]))
    }

    /// The length the backend gets is the number the gateway read, written anew: never the client's bytes, whose
    /// leading zeros a backend could read as octal. The same for a length the gateway set (a body it changed).
    @Test func theBodyLengthIsWrittenAsTheNumberItWasReadAs() throws {
        let head = try self.parsed("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0003\r\n\r\n")
        let text = try self.rewritten(head, clientAddress: nil)
        #expect(text.contains("\r\ncontent-length: 3\r\n") && !text.contains("0003"), "\(text)")
        var builder = HTTP2RequestHeadBuilder(limit: 4096)
        for (name, value) in [(":method", "POST"), (":scheme", "https"), (":authority", "x"), (":path", "/a"), ("content-length", "0010")] {
            builder.add(name: name, value: value)
        }
        guard case .head(let http2) = builder.build() else {
            Issue.record("refused")
            return
        }
        let http2Text = try self.rewritten(http2, clientAddress: nil)
        #expect(http2Text.contains("\r\ncontent-length: 10\r\n") && !http2Text.contains("0010"), "\(http2Text)")
        let forwarding = RequestRewriter.Forwarding(clientAddress: nil, requestID: "rid", scheme: "https")
        for length in [0, 7, 10, 1_234_567, 999_999_999_999_999_999] {
            let changed = try #require(
                RequestRewriter.upstreamHead(from: head, identity: nil, strip: nil, withheldCookies: [], newBodyLength: length, forwarding: forwarding)
            )
            let lines = String(buffer: changed.bytes).components(separatedBy: "\r\n").filter { $0.hasPrefix("content-length") }
            #expect(lines == ["content-length: \(length)"], "\(lines)")
        }
    }

    /// An upstream with `keep_alive: false` tells its backend every request is the connection's last; the
    /// client's own `Connection` never goes through.
    @Test func anUpstreamWithoutKeepAliveGetsConnectionClose() throws {
        let head = try self.parsed("GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n")
        let forwarding = RequestRewriter.Forwarding(clientAddress: nil, requestID: "rid", scheme: "https")
        for close in [false, true] {
            let upstream = try #require(
                RequestRewriter.upstreamHead(
                    from: head, identity: nil, strip: nil, withheldCookies: [], newBodyLength: nil, closeConnection: close, forwarding: forwarding
                )
            )
            let lines = String(buffer: upstream.bytes).lowercased().components(separatedBy: "\r\n").filter { $0.hasPrefix("connection") }
            #expect(lines == (close ? ["connection: close"] : []), "\(lines)")
        }
    }

    /// The parse pass notes a `Connection` that names fields, and the fields it names never reach the backend.
    @Test func fieldsAConnectionListNamesAreDroppedFromAParsedHead() throws {
        let plain = try self.parsed("GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nX-Secret: s\r\n\r\n")
        #expect(!plain.fields.connectionNamesFields)
        let head = try self.parsed("GET /a HTTP/1.1\r\nHost: x\r\nX-Secret: s\r\nX-Other: o\r\nConnection: keep-alive, x-secret\r\n\r\n")
        #expect(head.fields.connectionNamesFields)
        let text = try self.rewritten(head, clientAddress: nil).lowercased()
        #expect(!text.contains("x-secret") && !text.contains("connection") && text.contains("x-other: o\r\n"), "\(text)")
    }

    @Test func aHeadWithoutFieldsHasNone() throws {
        let head = try self.parsed("GET / HTTP/1.0\r\n\r\n")
        #expect(head.fields.count == 0 && head.fields.bytes.isEmpty && head.fields.first(name: "host") == nil)
        #expect(!head.isKeepAlive)
    }

    @Test func fieldsPutInFrontAndAddedKeepTheirOrder() {
        var fields = RequestFields()
        fields.add(name: "accept", value: "*/*")
        fields.add(name: "authorization", value: "Bearer x")
        fields.prepend(name: "host", value: "h.example")
        fields.add(name: "transfer-encoding", value: "chunked")
        fields.prepend(name: "a", value: "")
        #expect(fields.count == 5)
        #expect(
            String(decoding: fields.bytes, as: UTF8.self)
                == "a: \r\nhost: h.example\r\naccept: */*\r\nauthorization: Bearer x\r\ntransfer-encoding: chunked\r\n"
        )
        #expect(fields.headers.map(\.name) == ["a", "host", "accept", "authorization", "transfer-encoding"])
    }

    /// A header token is handed to the verifier as a slice of the field lines, not a copy.
    @Test func aHeaderTokenIsASliceOfTheFieldLines() throws {
        let head = try self.parsed("GET /a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer  abc.def.ghi \r\n\r\n")
        let extractor = TokenExtractor(sources: [.authorization], realm: "r")
        guard case .token(let token, .authorization) = extractor.extract(method: .GET, uri: "/a", fields: head.fields, body: nil) else {
            Issue.record("no token")
            return
        }
        #expect(Array(token) == Array("abc.def.ghi".utf8))
        let sameStorage = token.withUnsafeBufferPointer { slice in
            head.fields.bytes.withUnsafeBufferPointer { whole in
                slice.baseAddress! >= whole.baseAddress! && slice.baseAddress! + slice.count <= whole.baseAddress! + whole.count
            }
        }
        #expect(sameStorage)
    }

    // MARK: The rewrite, against a model of what must never reach a backend.

    /// Client heads generated from names that must be dropped (hop-by-hop, forwarding, identity, `_`, named
    /// by `Connection`) in every case mix, among names that must pass: the upstream head holds exactly the
    /// passing fields, in order, with their values, and then the gateway's own.
    @Test func generatedHeadsLoseExactlyTheFieldsABackendMustNotSee() throws {
        let dropped = [
            "connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "proxy-authorization",
            "proxy-authenticate", "http2-settings", "expect", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host",
            "x-forwarded-port", "x-forwarded-prefix", "x-forwarded-server", "forwarded", "x-request-id", "x-real-ip",
            "true-client-ip", "x-client-ip", "x-original-url", "x-rewrite-url", "x-tokengate-user", "x-tokengate-anything",
            "x_tokengate_user", "x-api_key", "x-secret",
        ]
        let kept = ["accept", "user-agent", "x-forwarded", "x-tokengate", "tokengate-user", "cookie", "x-trace", "te-x"]
        var generator = SystemRandomNumberGenerator()
        func mixCase(_ name: String) -> String {
            String(name.map { Bool.random(using: &generator) ? Character($0.uppercased()) : $0 })
        }
        var checked = 0
        for round in 0..<2_000 {
            var fields: [(String, String)] = [("Host", "api.example")]
            var expected: [(String, String)] = [("Host", "api.example")]
            for index in 0..<Int.random(in: 0...12, using: &generator) {
                let value = "v\(round)-\(index)"
                if Bool.random(using: &generator), let name = dropped.randomElement(using: &generator) {
                    fields.append((mixCase(name), name.hasSuffix("connection") ? "close" : value))
                } else if let name = kept.randomElement(using: &generator) {
                    let field = (mixCase(name), value)
                    fields.append(field)
                    expected.append(field)
                }
            }
            // `X-Secret` is only dropped because `Connection` names it; framing and Host never are.
            fields.append(("Connection", "keep-alive, \(mixCase("x-secret")), Host, content-length"))
            let head = ClientRequestHead(version: .http1_1, method: .GET, uri: "/r", headers: HTTPHeaders(fields))
            let lines = try self.rewritten(head, clientAddress: "192.0.2.1").components(separatedBy: "\r\n")
            #expect(lines.first == "GET /r HTTP/1.1" && lines.suffix(2) == ["", ""])
            let forwarded = lines.dropFirst().dropLast(2).map { line -> (String, String) in
                let colon = line.firstIndex(of: ":")!
                return (String(line[..<colon]), String(line[line.index(after: colon)...].dropFirst()))
            }
            let gatewayOwn: [(String, String)] = [
                ("x-forwarded-for", "192.0.2.1"), ("x-forwarded-proto", "https"), ("x-forwarded-host", "api.example"),
                ("x-request-id", "rid"),
            ]
            let matches = forwarded.elementsEqual(expected + gatewayOwn) { $0.0 == $1.0 && $0.1 == $1.1 }
            #expect(matches, "\(fields) -> \(forwarded)")
            checked += 1
        }
        #expect(checked == 2_000)
    }
}
