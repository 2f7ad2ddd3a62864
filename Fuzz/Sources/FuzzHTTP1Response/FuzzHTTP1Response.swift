//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
import NIOCore
import NIOHTTP1
@testable import TokengateHTTP

/// The input is what a backend sends on one connection (its first byte says whether the requests were HEAD:
/// odd for HEAD), read by the gateway's response parser with its default limits, one request sent before each
/// response, and the connection closed after the last byte.
///
/// Besides not crashing: as for requests, the responses read must not depend on how the bytes were split (at
/// once, byte by byte, in chunks of a size taken from the input), nor must whether the connection is kept.
@main
enum FuzzHTTP1Response {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzHTTP1Response(data, size) })
    }
}

/// What the parser read, with body bytes joined (their split follows the input's).
enum Read: Equatable {
    case head(UpstreamResponseHead)
    case body([UInt8])
    case end(HTTPHeaders?)
    case failed
    case kept(Bool)
}

func parse(_ bytes: ArraySlice<UInt8>, method: HTTPMethod, chunk: Int) -> [Read] {
    var parser = HTTP1ResponseParser()
    var buffer = ByteBufferAllocator().buffer(capacity: 0)
    var reads: [Read] = []
    var offset = bytes.startIndex
    func record(_ part: UpstreamResponsePart) {
        switch part {
        case .head(let head): reads.append(.head(head))
        case .body(var slice):
            let piece = slice.readBytes(length: slice.readableBytes) ?? []
            if case .body(let earlier) = reads.last {
                reads[reads.count - 1] = .body(earlier + piece)
            } else {
                reads.append(.body(piece))
            }
        case .end(let trailers):
            reads.append(.end(trailers))
            reads.append(.kept(parser.keepsConnection))
        }
    }
    do {
        repeat {
            let end = min(offset + chunk, bytes.endIndex)
            buffer.writeBytes(bytes[offset..<end])
            offset = end
            while true {
                // One request at a time, as the upstream connection sends them; none after a closing response.
                if parser.isIdle {
                    guard parser.keepsConnection, buffer.readableBytes > 0 else { break }
                    parser.requestSent(method: method)
                }
                guard let part = try parser.next(from: &buffer) else { break }
                record(part)
            }
        } while offset < bytes.endIndex
        if let part = try parser.connectionClosed() { record(part) }
    } catch {
        reads.append(.failed)
    }
    return reads
}

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzHTTP1Response(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = UnsafeBufferPointer(start: data, count: size)
    guard let first = input.first else { return 0 }
    let method: HTTPMethod = first & 1 == 1 ? .HEAD : .GET
    let bytes = Array(input)[1...]
    let whole = parse(bytes, method: method, chunk: max(bytes.count, 1))
    // Byte by byte up to 20,000 bytes; past that every third byte, which still dribbles a head to its 80 KiB
    // limit but keeps a 90 KB input within -timeout on a busy machine (a read costs the unoptimised, sanitized
    // build some 25 µs).
    let single = parse(bytes, method: method, chunk: bytes.count <= 20_000 ? 1 : 3)
    let chunked = parse(bytes, method: method, chunk: 2 + Int(first >> 1) % 61)
    guard whole == single, whole == chunked else {
        fatalError("the responses read depend on how the bytes were split:\n\(whole)\n\(single)\n\(chunked)")
    }
    return 0
}
