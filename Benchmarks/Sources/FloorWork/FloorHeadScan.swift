//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import NIOCore

/// The two scans a floor proxy makes of an HTTP/1.1 head: where it ends, and its `Content-Length`.
///
/// Deliberately naive (no validation at all): a floor measures what a proxy's construction (its event loop, its
/// TLS termination) costs before any HTTP work, so any parsing here would be a cost the floor should not have.
/// Both floors (`nio-floor-proxy`, `epoll-floor-proxy`) use this one copy, so they do exactly the same work.
/// It is never pointed at anything but the bench backend and bench clients.
public enum FloorHeadScan {
    @usableFromInline static let carriageReturn = UInt8(ascii: "\r")
    @usableFromInline static let lineFeed = UInt8(ascii: "\n")
    @usableFromInline static let name = Array("\ncontent-length:".utf8)

    /// The length of the head at the front of `bytes` up to and including its empty line, or nil.
    @inlinable
    public static func headLength(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = 3
        while index < bytes.count {
            if bytes[index] == Self.lineFeed, bytes[index - 1] == Self.carriageReturn, bytes[index - 2] == Self.lineFeed,
                bytes[index - 3] == Self.carriageReturn
            {
                return index + 1
            }
            index += 1
        }
        return nil
    }

    /// The value of the first `Content-Length` field of `head`, or nil.
    @inlinable
    public static func contentLength(_ head: UnsafeRawBufferPointer.SubSequence) -> Int? {
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

    /// The length of the request at the front of `bytes` (bodiless requests only: its head), or nil until whole.
    @inlinable
    public static func requestLength(_ bytes: ByteBuffer) -> Int? {
        bytes.withUnsafeReadableBytes { Self.headLength($0) }
    }

    /// The length of the response at the front of `bytes`, head and body, or nil until its head is whole.
    @inlinable
    public static func responseLength(_ bytes: ByteBuffer) -> Int? {
        bytes.withUnsafeReadableBytes { raw -> Int? in
            guard let headEnd = Self.headLength(raw) else { return nil }
            let body = Self.contentLength(raw[..<headEnd]) ?? 0
            return headEnd + body
        }
    }
}
