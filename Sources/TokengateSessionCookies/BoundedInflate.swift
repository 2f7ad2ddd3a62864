//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateZlib

/// Inflates the zlib stream (RFC 1950) of a compressed Flask or Django session cookie into a buffer of fixed
/// size, so that a compression bomb costs at most that buffer and one pass over its input.
///
/// Deflate expands at most about 1032:1, so a 4 KiB cookie could claim 4 MiB; the cap (``SessionCookieLimits``)
/// stops the stream as soon as the output is full. Only a stream that ends exactly at the end of the input is
/// accepted: a truncated stream, trailing bytes, a bad checksum or a preset dictionary are all refusals.
enum BoundedInflate {
    enum Outcome {
        case inflated(Int)
        /// More output than the cap.
        case tooLarge
        /// Not a complete, valid zlib stream.
        case invalid
    }

    static func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) -> Outcome {
        guard input.count > 0, let inputBase = input.baseAddress, let outputBase = output.baseAddress else {
            return .invalid
        }
        var stream = z_stream()
        // zlib's macro `inflateInit` is not visible to Swift; this is what it expands to.
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { return .invalid }
        defer { inflateEnd(&stream) }
        stream.next_in = UnsafeMutablePointer(mutating: inputBase.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        stream.next_out = outputBase.assumingMemoryBound(to: Bytef.self)
        stream.avail_out = uInt(output.count)
        // One call with all the input and all the room: Z_FINISH either ends the stream or says why not.
        let status = CTokengateZlib.inflate(&stream, Z_FINISH)
        switch status {
        case Z_STREAM_END:
            guard stream.avail_in == 0 else { return .invalid }
            return .inflated(output.count - Int(stream.avail_out))
        case Z_BUF_ERROR where stream.avail_out == 0, Z_OK where stream.avail_out == 0:
            return .tooLarge
        default:
            return .invalid
        }
    }
}
