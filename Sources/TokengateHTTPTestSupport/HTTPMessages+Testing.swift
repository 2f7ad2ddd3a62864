//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateHTTP

extension RequestFields {
    /// `headers` as the lines a parser would keep. Test values hold no CR, LF or NUL (``RequestFields``'s
    /// invariant); the parsers' own tests check that such lines never get this far.
    package init(_ headers: HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            precondition(!value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }, "a test field value that could end its line")
            self.add(name: name, value: value)
        }
    }
}

extension ClientRequestHead {
    package init(version: HTTPVersion, method: HTTPMethod, uri: String, headers: HTTPHeaders) {
        self.init(version: version, method: method, uri: uri, fields: RequestFields(headers))
    }

    /// The fields as strings, for comparing with what NIO's decoder makes of the same bytes.
    package var headers: HTTPHeaders { self.fields.headers }
}

extension HTTP2RequestHeadBuilder {
    /// ``add(name:value:)`` with the field as nghttp2 would hand over its bytes.
    @discardableResult
    package mutating func add(name: String, value: String) -> Bool {
        FieldBytes.withBytes(of: name, value) { name, value in self.add(name: name, value: value) }
    }
}

extension UpstreamResponseHead {
    /// `head` in the bytes a backend would send, its field lines checked as ``HTTP1ResponseParser`` checks them
    /// — but not its framing, so that tests can hand the client side heads the parser would refuse.
    package init(_ head: HTTPResponseHead) throws {
        var block = ByteBuffer(string: "HTTP/\(head.version.major).\(head.version.minor) \(head.status.code) \(head.status.reasonPhrase)\r\n")
        let fieldsStart = block.readableBytes
        for (name, value) in head.headers {
            block.writeString("\(name): \(value)\r\n")
        }
        block.writeString("\r\n")
        // The connection fields as the parser reads them; a bad length is not refused here (see above).
        var connectionNamesFields = false
        let count = try block.withHTTP1Bytes { bytes throws(HTTP1ParseFailure) in
            try HTTP1Syntax.forEachField(bytes, from: fieldsStart, maxFields: 1000) { name, value throws(HTTP1ParseFailure) in
                var fields = HTTP1Syntax.FramingFields()
                if FieldBytes.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: bytes[name]), "connection") {
                    try fields.add(name: UnsafeRawBufferPointer(rebasing: bytes[name]), value: UnsafeRawBufferPointer(rebasing: bytes[value]))
                }
                connectionNamesFields = connectionNamesFields || fields.connectionNamesFields
            }
        }
        self.init(
            version: head.version,
            status: head.status,
            checkedBlock: block,
            fieldsStart: fieldsStart,
            fieldCount: count,
            connectionNamesFields: connectionNamesFields
        )
    }

    /// The fields as strings, in order (the gateway itself never makes strings of them).
    package var headers: HTTPHeaders {
        var fields: [(String, String)] = []
        fields.reserveCapacity(self.fieldCount)
        self.forEachField { name, value in
            fields.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return HTTPHeaders(fields)
    }

    /// The fields the client gets (``ProxyFieldRules/forEachClientResponseField(of:close:hsts:added:_:)``), as strings,
    /// with the default `Strict-Transport-Security`.
    package func clientFields(close: Bool, hsts: String? = "max-age=31536000") -> HTTPHeaders {
        var fields: [(String, String)] = []
        ProxyFieldRules.forEachClientResponseField(of: self, close: close, hsts: hsts) { name, value in
            fields.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return HTTPHeaders(fields)
    }
}
