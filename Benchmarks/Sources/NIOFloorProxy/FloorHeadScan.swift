//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The two scans a floor proxy makes of an HTTP/1.1 head: where it ends, and its `Content-Length`.
///
/// Deliberately naive (no validation at all): the floor measures what a proxy costs on SwiftNIO with the
/// gateway's TLS handler before any HTTP work, so any parsing here would be a cost the floor should not have.
/// It is never pointed at anything but the bench backend and bench clients.
enum FloorHeadScan {
    private static let carriageReturn = UInt8(ascii: "\r")
    private static let lineFeed = UInt8(ascii: "\n")
    private static let name = Array("\ncontent-length:".utf8)

    /// The length of the head at the front of `bytes` up to and including its empty line, or nil.
    static func headLength(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 3
        while index < bytes.count {
            if bytes[index] == lineFeed, bytes[index - 1] == carriageReturn, bytes[index - 2] == lineFeed,
                bytes[index - 3] == carriageReturn
            {
                return index + 1
            }
            index += 1
        }
        return nil
    }

    /// The value of the first `Content-Length` field of `head`, or nil.
    static func contentLength(_ head: UnsafeRawBufferPointer.SubSequence) -> Int? {
        var index = head.startIndex
        while index + Self.name.count <= head.endIndex {
            var matches = true
            for offset in 0..<Self.name.count where head[index + offset] | 0x20 != Self.name[offset] | 0x20 {
                matches = false
                break
            }
            if matches {
                var value = 0
                var cursor = index + Self.name.count
                while cursor < head.endIndex, head[cursor] == UInt8(ascii: " ") { cursor += 1 }
                while cursor < head.endIndex, head[cursor] >= UInt8(ascii: "0"), head[cursor] <= UInt8(ascii: "9") {
                    value = value * 10 + Int(head[cursor] - UInt8(ascii: "0"))
                    cursor += 1
                }
                return value
            }
            index += 1
        }
        return nil
    }
}
