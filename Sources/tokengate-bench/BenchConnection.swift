//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The top handler of a slot's live connection, whichever protocol it speaks. A closed set of two, so an
/// enum: the slot's send path switches on it without an existential.
enum BenchConnection {
    /// One request at a time; its tag is always 0.
    case http1(BenchClientHandler)
    /// Many streams; a request's tag is its stream id.
    case http2(BenchHTTP2Handler)

    /// Sends (HTTP/1.1) or submits (HTTP/2) `request`; returns its tag, or nil when the connection takes no
    /// new request.
    func send(_ request: PreparedRequest) -> Int32? {
        switch self {
        case .http1(let handler):
            handler.send(request)
            return 0
        case .http2(let handler):
            return handler.send(request)
        }
    }

    /// Puts what `send` queued on the wire (HTTP/1.1 already flushed each request).
    func flush() {
        switch self {
        case .http1:
            break
        case .http2(let handler):
            handler.flush()
        }
    }

    func close() {
        switch self {
        case .http1(let handler): handler.close()
        case .http2(let handler): handler.close()
        }
    }
}
