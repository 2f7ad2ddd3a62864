//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
import NIOCore
import NIOHTTP1
@testable import TokengateHTTP

/// The input is what a client sends on one HTTP/1.1 connection, read by the gateway's request parser with the
/// default limits (`max_header_bytes` 16 KiB, `max_uri_bytes` 8 KiB).
///
/// Besides not crashing: the parser is incremental, and TCP may split the bytes anywhere, so the requests it
/// reads must not depend on where: the bytes given at once, byte by byte and in chunks of a size taken from the
/// input must give the same heads, the same body bytes, the same trailers and the same failure. A parser whose
/// answer depends on the split is one an attacker can steer by timing (request smuggling).
@main
enum FuzzHTTP1Request {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzHTTP1Request(data, size) })
    }
}

/// What the parser read, with body bytes joined (their split follows the input's).
enum Read: Equatable {
    case head(ClientRequestHead)
    case body([UInt8])
    case end(HTTPHeaders?)
    case failed
}

func parse(_ bytes: [UInt8], chunk: Int) -> [Read] {
    var parser = HTTP1RequestParser(limits: .init(maxHeadBytes: 16 * 1024, maxURIBytes: 8 * 1024))
    var buffer = ByteBufferAllocator().buffer(capacity: 0)
    var reads: [Read] = []
    var offset = 0
    repeat {
        let end = min(offset + chunk, bytes.count)
        buffer.writeBytes(bytes[offset..<end])
        offset = end
        do {
            while let part = try parser.next(from: &buffer) {
                switch part {
                case .head(let head): reads.append(.head(head))
                case .body(var slice):
                    let piece = slice.readBytes(length: slice.readableBytes) ?? []
                    if case .body(let earlier) = reads.last {
                        reads[reads.count - 1] = .body(earlier + piece)
                    } else {
                        reads.append(.body(piece))
                    }
                case .end(let trailers): reads.append(.end(trailers))
                }
            }
        } catch {
            reads.append(.failed)
            return reads
        }
    } while offset < bytes.count
    return reads
}

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzHTTP1Request(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = parse(bytes, chunk: max(bytes.count, 1))
    let single = parse(bytes, chunk: 1)
    let chunked = parse(bytes, chunk: 2 + Int(bytes.first ?? 0) % 61)
    guard whole == single, whole == chunked else {
        fatalError("the requests read depend on how the bytes were split:\n\(whole)\n\(single)\n\(chunked)")
    }
    return 0
}
