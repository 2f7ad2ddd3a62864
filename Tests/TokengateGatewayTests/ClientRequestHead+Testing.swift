//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateHTTP

@testable import TokengateGateway

extension RequestFields {
    /// `headers` as the lines a parser would keep. Test values hold no CR, LF or NUL (``RequestFields``'s
    /// invariant); the parsers' own tests check that such lines never get this far.
    init(_ headers: HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            precondition(!value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }, "a test field value that could end its line")
            self.add(name: name, value: value)
        }
    }
}

extension ClientRequestHead {
    init(version: HTTPVersion, method: HTTPMethod, uri: String, headers: HTTPHeaders) {
        self.init(version: version, method: method, uri: uri, fields: RequestFields(headers))
    }

    /// The fields as strings, for comparing with what NIO's decoder makes of the same bytes.
    var headers: HTTPHeaders { self.fields.headers }
}

extension HTTP2RequestHeadBuilder {
    /// ``add(name:value:)`` with the field as nghttp2 would hand over its bytes.
    @discardableResult
    mutating func add(name: String, value: String) -> Bool {
        FieldBytes.withBytes(of: name, value) { name, value in self.add(name: name, value: value) }
    }
}

extension TokenExtractor {
    func extract(method: HTTPMethod, uri: String, headers: HTTPHeaders, body: [UInt8]?) -> Outcome {
        self.extract(method: method, uri: uri, fields: RequestFields(headers), body: body)
    }

    /// What ``bearerToken(_:)`` finds in `value`, with the token as a string.
    enum BearerText: Equatable {
        case notBearer
        case malformed
        case token(String)
    }

    static func bearerToken(_ value: String) -> BearerText {
        var value = value
        return value.withUTF8 { bytes in
            switch Self.bearerToken(UnsafeRawBufferPointer(bytes)) {
            case .notBearer: .notBearer
            case .malformed: .malformed
            case .token(let range): .token(String(decoding: bytes[range], as: UTF8.self))
            }
        }
    }
}

extension TokenExtractor.Outcome {
    /// A found token, written as a string.
    static func token(_ text: String, _ source: TokenSource) -> Self {
        .token(ArraySlice(text.utf8), source)
    }
}

extension UpstreamRequestHead {
    /// The head as the upstream connection writes it, in a buffer of its own.
    var bytes: ByteBuffer {
        var bytes = ByteBuffer()
        self.write(into: &bytes)
        return bytes
    }
}
