//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// An outgoing header block (response head or trailers) in the flat form the C shim takes: every name and
/// value back to back in ``bytes``, their lengths in ``lengths``, and a never-index mark per field.
///
/// Building it is where HTTP/1 response heads become HTTP/2: `:status` first, names lowercased (HTTP/2
/// forbids uppercase, nghttp2 does not fix it when sending), and the connection-specific fields that an
/// HTTP/2 message must not carry removed (RFC 9113 §8.2.2): `connection`, every field `connection` names,
/// `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`, `te`, `http2-settings`.
struct HTTP2HeaderBlock: Sendable, Equatable {
    private(set) var bytes: [UInt8] = []
    private(set) var lengths: [Int] = []
    private(set) var neverIndex: [UInt8] = []

    var count: Int { self.neverIndex.count }

    /// Lowercase, as they are compared (ASCII case-insensitively, lengths first).
    private static let hopByHop: [StaticString] = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "http2-settings",
    ]
    /// Fields that carry secrets: kept out of the HPACK dynamic table, so a compression oracle cannot
    /// recover them. `location` too: the token page's app callback carries the token in its fragment.
    private static let sensitive: [StaticString] = [
        "set-cookie", "authorization", "proxy-authorization", "cookie", "location",
    ]

    /// The response head's fields; `nil` for an informational (1xx) head, which is not forwarded.
    static func response(_ head: HTTPResponseHead) -> HTTP2HeaderBlock? {
        guard head.status.code >= 200, head.status.code <= 999 else { return nil }
        var block = HTTP2HeaderBlock()
        // Sized for `:status` and every field before the first append: three allocations per head, where
        // appending `:status` first and reserving afterwards made six.
        block.reserve(for: head.headers, plusBytes: 10, plusFields: 1)
        block.append(":status", String(head.status.code), sensitive: false)
        block.appendRegular(head.headers)
        return block
    }

    /// The backend's response head as the client gets it (``RequestRewriter/forEachClientResponseField(of:close:_:)``),
    /// straight from the bytes it came in; `nil` for an informational (1xx) head.
    static func response(fromUpstream head: UpstreamResponseHead, close: Bool) -> HTTP2HeaderBlock? {
        guard head.status.code >= 200, head.status.code <= 999 else { return nil }
        var block = HTTP2HeaderBlock()
        // `:status`, the backend's fields and the two the filter may add (HSTS, `connection`, dropped here).
        block.bytes.reserveCapacity(head.fieldBytes + 10 + 41)
        block.lengths.reserveCapacity(2 * (head.fieldCount + 2))
        block.neverIndex.reserveCapacity(head.fieldCount + 2)
        block.append(":status", String(head.status.code), sensitive: false)
        // The filter has already removed what `Connection` names: no names to pass on.
        RequestRewriter.forEachClientResponseField(of: head, close: close) { name, value in
            block.appendRegular(name: name, value: value, named: [])
        }
        return block
    }

    /// The trailers' fields; `nil` when nothing is left to send.
    static func trailers(_ headers: HTTPHeaders) -> HTTP2HeaderBlock? {
        var block = HTTP2HeaderBlock()
        block.reserve(for: headers, plusBytes: 0, plusFields: 0)
        block.appendRegular(headers)
        return block.count == 0 ? nil : block
    }

    /// The field names in order (for tests and logs; values are never logged).
    var names: [String] {
        var result: [String] = []
        var offset = 0
        for index in 0..<self.count {
            let nameLength = self.lengths[2 * index]
            result.append(String(decoding: self.bytes[offset..<offset + nameLength], as: UTF8.self))
            offset += nameLength + self.lengths[2 * index + 1]
        }
        return result
    }

    /// Sizes the three arrays once, for every field of `headers` plus what is appended besides them.
    private mutating func reserve(for headers: HTTPHeaders, plusBytes: Int, plusFields: Int) {
        var size = plusBytes
        for (name, value) in headers { size += name.utf8.count + value.utf8.count }
        self.bytes.reserveCapacity(size)
        self.lengths.reserveCapacity(2 * (headers.count + plusFields))
        self.neverIndex.reserveCapacity(headers.count + plusFields)
    }

    /// Appends `headers` but what HTTP/2 forbids and what their `Connection` names.
    private mutating func appendRegular(_ headers: HTTPHeaders) {
        var named: [String] = []
        if RequestRewriter.connectionListsNames(headers) {
            for value in headers[canonicalForm: "connection"] { named.append(String(value)) }
        }
        for (name, value) in headers {
            var name = name
            var value = value
            name.withUTF8 { name in
                value.withUTF8 { value in
                    self.appendRegular(name: UnsafeRawBufferPointer(name), value: UnsafeRawBufferPointer(value), named: named)
                }
            }
        }
    }

    /// Runs for every response: names are lowercased straight into the block and classified by byte
    /// comparison, without a lowercased `String` or a hashed `Set` look-up per field, into a block sized
    /// once beforehand (this used to be a fifth of the allocations of an HTTP/2 request).
    private mutating func appendRegular(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, named: [String]) {
        if name.isEmpty || name[0] == UInt8(ascii: ":") { return }
        if FieldBytes.isOne(of: Self.hopByHop, name) { return }
        if !named.isEmpty, named.contains(where: { Self.equalsIgnoringCase(name, $0) }) { return }
        let sensitive = FieldBytes.isOne(of: Self.sensitive, name)
        for byte in name { self.bytes.append(FieldBytes.lower(byte)) }
        self.bytes.append(contentsOf: value)
        self.lengths.append(name.count)
        self.lengths.append(value.count)
        self.neverIndex.append(sensitive ? 1 : 0)
    }

    private static func equalsIgnoringCase(_ name: UnsafeRawBufferPointer, _ other: String) -> Bool {
        var other = other
        return other.withUTF8 { FieldBytes.equalsIgnoringCase(name, UnsafeRawBufferPointer($0)) }
    }

    private mutating func append(_ name: String, _ value: String, sensitive: Bool) {
        self.bytes.append(contentsOf: name.utf8)
        self.bytes.append(contentsOf: value.utf8)
        self.lengths.append(name.utf8.count)
        self.lengths.append(value.utf8.count)
        self.neverIndex.append(sensitive ? 1 : 0)
    }
}
