//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import Testing
import TokengateHTTP
import TokengateHTTPTestSupport


@Suite struct HTTP2HeaderMappingTests {
    private func build(_ fields: [(String, String)], limit: Int = 4096) -> HTTP2RequestHeadBuilder.Outcome {
        var builder = HTTP2RequestHeadBuilder(limit: limit)
        for (name, value) in fields { builder.add(name: name, value: value) }
        return builder.build()
    }

    private let pseudo = [(":method", "POST"), (":scheme", "https"), (":authority", "api.example.test"), (":path", "/v1/x?y=1")]

    @Test func pseudoHeadersBecomeAnHTTP1Head() throws {
        guard case .head(let head) = self.build(self.pseudo + [("accept", "*/*"), ("cookie", "a=1"), ("cookie", "b=2")]) else {
            Issue.record("rejected")
            return
        }
        #expect(head.method == .POST)
        #expect(head.uri == "/v1/x?y=1")
        #expect(head.version == HTTPVersion(major: 2, minor: 0))
        #expect(head.headers[canonicalForm: "host"] == ["api.example.test"])
        #expect(head.headers.first(name: "accept") == "*/*")
        #expect(head.headers[canonicalForm: "cookie"] == ["a=1; b=2"])
        #expect(!head.headers.contains(name: ":authority"))
        #expect(head.headers.map(\.name) == ["host", "accept", "cookie"], "the host first, the joined cookie last")
    }

    @Test func aMatchingHostIsFoldedAndAConflictingOneRejected() {
        guard case .head(let head) = self.build(self.pseudo + [("accept", "*/*"), ("host", "API.example.test"), ("x-a", "1")]) else {
            Issue.record("rejected")
            return
        }
        #expect(head.headers[canonicalForm: "host"] == ["api.example.test"])
        #expect(head.headers.map(\.name) == ["host", "accept", "x-a"])
        guard case .reject(let answer) = self.build(self.pseudo + [("host", "evil.example")]) else {
            Issue.record("accepted a Host that differs from :authority")
            return
        }
        #expect(answer.status == .badRequest)
    }

    @Test func hostWithoutAuthorityIsUsedAndNeitherIsRejected() {
        let noAuthority = self.pseudo.filter { $0.0 != ":authority" }
        guard case .head(let head) = self.build(noAuthority + [("accept", "*/*"), ("host", "h.example")]) else {
            Issue.record("rejected")
            return
        }
        #expect(head.headers.first(name: "host") == "h.example")
        #expect(head.headers.map(\.name) == ["host", "accept"])
        guard case .reject = self.build(noAuthority) else {
            Issue.record("accepted a request with no authority")
            return
        }
    }

    @Test func theHeaderListCapGivesA431() {
        var builder = HTTP2RequestHeadBuilder(limit: 200)
        for (name, value) in self.pseudo { builder.add(name: name, value: value) }
        #expect(!builder.oversized)
        builder.add(name: "x-big", value: String(repeating: "a", count: 100))
        #expect(builder.oversized)
        #expect(builder.listSize > 200)
        guard case .reject(let answer) = builder.build() else {
            Issue.record("accepted an oversized header list")
            return
        }
        #expect(answer.status == .requestHeaderFieldsTooLarge)
    }

    /// Past twice the cap the builder asks for no more fields (the codec then has nghttp2 reset the stream
    /// and skip the rest of the block), and a list over the cap keeps no storage however long it grows.
    @Test func pastTwiceTheCapNoMoreFieldsAreTaken() {
        var builder = HTTP2RequestHeadBuilder(limit: 200)
        for (name, value) in self.pseudo {
            let more = builder.add(name: name, value: value)
            #expect(more)
        }
        var more = builder.add(name: "x-a", value: String(repeating: "a", count: 100))
        #expect(more && builder.oversized)
        more = builder.add(name: "x-b", value: String(repeating: "b", count: 30))
        #expect(more, "still within twice the cap")
        more = builder.add(name: "x-c", value: String(repeating: "c", count: 100))
        #expect(!more)
        #expect(builder.listSize > builder.resetLimit && builder.resetLimit == 400)
    }

    /// The checks HTTP/1.1's parser makes and nghttp2 does not, with HTTP/1.1's answers.
    @Test(arguments: [
        ("method FOO", [(":method", "FOO")], UInt(400), "an unknown method"),
        ("method get", [(":method", "get")], 400, "an unknown method"),
        ("authority userinfo", [(":authority", "user@localhost")], 400, ":authority must not contain userinfo"),
        ("authority user:pass", [(":authority", "user:pw@api.example.test")], 400, ":authority must not contain userinfo"),
    ])
    func requestsHTTP1WouldRefuseAreRefused(_ name: String, _ replace: [(String, String)], _ status: UInt, _ description: String) {
        let fields = self.pseudo.map { field in replace.first { $0.0 == field.0 } ?? field }
        guard case .reject(let answer) = self.build(fields) else {
            Issue.record("\(name): accepted")
            return
        }
        #expect(answer.status.code == status, "\(name)")
        #expect(answer.jsonBody.contains(description), "\(name)")
    }

    /// nghttp2 takes any run of digits as a `content-length`; HTTP/1.1's parser refuses more than 18 (the length
    /// is forwarded as the number it is read as, so it must be one): so does the head builder, with its answer.
    @Test func aContentLengthOfMoreThan18DigitsIsRefused() {
        guard case .reject(let answer) = self.build(self.pseudo + [("content-length", "0000000000000000010")]) else {
            Issue.record("accepted")
            return
        }
        #expect(answer.status == .badRequest && answer.jsonBody.contains("Content-Length is not a number"))
        guard case .head = self.build(self.pseudo + [("content-length", "000000000000000010")]) else {
            Issue.record("18 digits refused")
            return
        }
    }

    @Test func aHostWithUserinfoIsRefused() {
        let noAuthority = self.pseudo.filter { $0.0 != ":authority" }
        guard case .reject(let answer) = self.build(noAuthority + [("host", "user@h.example")]) else {
            Issue.record("accepted")
            return
        }
        #expect(answer.status == .badRequest)
    }

    @Test func knownMethodsAndQueryPass() {
        for method in ["GET", "POST", "DELETE", "PROPFIND", "QUERY", "OPTIONS"] {
            let fields = [(":method", method)] + self.pseudo.dropFirst()
            guard case .head(let head) = self.build(fields) else {
                Issue.record("\(method) rejected")
                continue
            }
            #expect(head.method.rawValue == method)
        }
    }

    /// HTTP/1.1's 256 fields (the `cookie` fields joined count once; the pseudo-headers not at all).
    @Test func moreFieldsThanHTTP1AllowsGetA431() {
        #expect(HTTP2ServerConfiguration().maxHeaderFields == HTTP1RequestParser.Limits(maxHeadBytes: 1, maxURIBytes: 1).maxFields)
        let many = (0..<255).map { ("x-f\($0)", "1") }
        let crumbs = (0..<20).map { ("cookie", "c\($0)=1") }
        guard case .head(let head) = self.build(self.pseudo + many + crumbs, limit: 65_536) else {
            Issue.record("256 fields rejected")
            return
        }
        #expect(head.fields.count == 257, "host, 255 fields, cookie")
        guard case .reject(let answer) = self.build(self.pseudo + many + [("x-one-more", "1")] + crumbs, limit: 65_536) else {
            Issue.record("257 fields accepted")
            return
        }
        #expect(answer.status == .requestHeaderFieldsTooLarge)
    }

    @Test func connectIsRejected() {
        guard case .reject(let answer) = self.build([(":method", "CONNECT"), (":authority", "x:443")]) else {
            Issue.record("accepted CONNECT")
            return
        }
        #expect(answer.status == .badRequest)
    }

    @Test func responseHeadsLoseHopByHopFieldsAndAreLowercased() throws {
        let head = HTTPResponseHead(
            version: .http1_1,
            status: .created,
            headers: [
                "Content-Type": "text/plain", "Connection": "close, X-Hop", "X-Hop": "1", "Keep-Alive": "timeout=5",
                "Transfer-Encoding": "chunked", "Upgrade": "h2c", "TE": "trailers", "Proxy-Connection": "x",
                "Set-Cookie": "s=1", "X-Upper": "A",
            ]
        )
        let block = try #require(HTTP2HeaderBlock.response(head))
        #expect(block.names == [":status", "content-type", "set-cookie", "x-upper"])
        #expect(block.neverIndex == [0, 0, 1, 0])
        // What the C shim gets: names and values back to back, `:status` first.
        let flat = block.withFlatFields { bytes, lengths, neverIndex in
            (Array(UnsafeRawBufferPointer(start: bytes, count: 10)), Array(UnsafeBufferPointer(start: lengths, count: 8)),
             Array(UnsafeBufferPointer(start: neverIndex, count: 4)))
        }
        #expect(flat.0 == Array(":status201".utf8))
        #expect(flat.1 == [7, 3, 12, 10, 10, 3, 7, 1])
        #expect(flat.2 == [0, 0, 1, 0])
    }

    @Test func informationalHeadsAreNotForwarded() {
        #expect(HTTP2HeaderBlock.response(HTTPResponseHead(version: .http1_1, status: .continue)) == nil)
        #expect(HTTP2HeaderBlock.trailers(["Connection": "close"]) == nil)
        #expect(HTTP2HeaderBlock.trailers(["X-Sum": "1"])?.names == ["x-sum"])
        // The fields no trailer may carry are dropped as they are for HTTP/1.1 clients (framing, routing, hop by hop).
        let trailers = HTTP2HeaderBlock.trailers([
            "Content-Length": "5", "x-checksum": "1", "Host": "h", "Trailer": "x", "Proxy-Authenticate": "Basic",
            "Transfer-Encoding": "chunked", "Keep-Alive": "1", "Set-Cookie": "s=1",
        ])
        #expect(trailers?.names == ["x-checksum", "set-cookie"])
        #expect(trailers?.neverIndex == [0, 1])
    }
}
