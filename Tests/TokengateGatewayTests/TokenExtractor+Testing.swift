//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateConfig
import TokengateHTTP
import TokengateHTTPTestSupport

@testable import TokengateGateway

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
