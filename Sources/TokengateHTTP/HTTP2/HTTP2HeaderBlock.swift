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
package struct HTTP2HeaderBlock: Sendable, Equatable {
    /// Two arrays, sized once (two allocations per head; three when the marks had an array of their own):
    /// `storage` holds a never-index mark per field (``flagCapacity`` bytes, zero where unused), then every
    /// name and value back to back; `lengths` the name and value lengths in the same order.
    private var storage: [UInt8]
    package private(set) var lengths: [Int] = []
    /// Where the names and values start in ``storage``: room for this many fields' marks.
    private var flagCapacity: Int
    package private(set) var count = 0

    /// An empty block, with no storage yet.
    package init() {
        self.storage = []
        self.flagCapacity = 0
    }

    /// A block with room for the marks of `maxFields` fields and `dataBytes` of names and values.
    private init(maxFields: Int, dataBytes: Int) {
        self.init()
        self.prepare(maxFields: maxFields, dataBytes: dataBytes)
    }

    /// Empties the block for new fields, keeping its storage: with room for the marks of `maxFields` fields and
    /// `dataBytes` of names and values. No allocation when the storage is large enough and this block is its
    /// only holder (``HTTP2StreamSpares`` hands blocks out by moving them).
    private mutating func prepare(maxFields: Int, dataBytes: Int) {
        self.storage.removeAll(keepingCapacity: true)
        self.lengths.removeAll(keepingCapacity: true)
        self.count = 0
        self.flagCapacity = maxFields
        self.storage.reserveCapacity(maxFields + dataBytes)
        self.storage.append(contentsOf: repeatElement(0, count: maxFields))
        self.lengths.reserveCapacity(2 * maxFields)
    }

    /// The bytes its storage can hold without growing.
    package var storageCapacity: Int { self.storage.capacity }

    /// A never-index mark per field (non-zero: kept out of HPACK's dynamic table).
    package var neverIndex: ArraySlice<UInt8> { self.storage[0..<self.count] }

    /// Calls `body` with what the C shim takes: the names and values back to back, their lengths, the marks.
    package func withFlatFields<Result>(
        _ body: (_ bytes: UnsafeRawPointer?, _ lengths: UnsafePointer<Int>?, _ neverIndex: UnsafePointer<UInt8>?) -> Result
    ) -> Result {
        self.storage.withUnsafeBufferPointer { storage in
            self.lengths.withUnsafeBufferPointer { lengths in
                let base = storage.baseAddress
                return body(base.map { UnsafeRawPointer($0 + self.flagCapacity) }, lengths.baseAddress, base)
            }
        }
    }

    /// Lowercase, as they are compared (ASCII case-insensitively, lengths first).
    private static let hopByHop = FieldNameSet([
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "http2-settings",
    ])
    /// Fields that carry secrets: kept out of the HPACK dynamic table, so a compression oracle cannot
    /// recover them. `location` too: the token page's app callback carries the token in its fragment.
    private static let sensitive = FieldNameSet([
        "set-cookie", "authorization", "proxy-authorization", "cookie", "location",
    ])

    /// The response head's fields; `nil` for an informational (1xx) head, which is not forwarded.
    package static func response(_ head: HTTPResponseHead) -> HTTP2HeaderBlock? {
        guard head.status.code >= 200, head.status.code <= 999 else { return nil }
        // Sized for `:status` and every field before the first append (appending `:status` first and
        // reserving afterwards made six allocations per head).
        var block = HTTP2HeaderBlock(for: head.headers, plusBytes: 10, plusFields: 1)
        block.append(":status", String(head.status.code), sensitive: false)
        block.appendRegular(head.headers)
        return block
    }

    /// The backend's response head as the client gets it (``ProxyFieldRules/forEachClientResponseField(of:close:hsts:added:_:)``),
    /// straight from the bytes it came in; `nil` for an informational (1xx) head.
    package static func response(
        fromUpstream head: UpstreamResponseHead, close: Bool, hsts: String?, added: [ResponseField] = []
    ) -> HTTP2HeaderBlock? {
        var block = HTTP2HeaderBlock()
        return block.writeResponse(fromUpstream: head, close: close, hsts: hsts, added: added) ? block : nil
    }

    /// ``response(fromUpstream:close:hsts:)`` written over this block's fields, in its storage; false (and the block
    /// left empty) for an informational (1xx) head.
    package mutating func writeResponse(
        fromUpstream head: UpstreamResponseHead, close: Bool, hsts: String?, added: [ResponseField] = []
    ) -> Bool {
        // `:status`, the backend's fields and the two the filter may add (HSTS, `connection`, dropped here), and
        // the gateway's added fields.
        var addedBytes = 0
        for field in added { addedBytes += field.name.utf8.count + field.value.utf8.count }
        self.prepare(maxFields: head.fieldCount + 3 + added.count, dataBytes: head.fieldBytes + 10 + 41 + addedBytes)
        guard head.status.code >= 200, head.status.code <= 999 else { return false }
        self.append(":status", String(head.status.code), sensitive: false)
        // The filter has already removed what `Connection` names (and a bodiless status's `Content-Length`).
        ProxyFieldRules.forEachClientResponseField(of: head, close: close, hsts: hsts, added: added) { name, value in
            self.appendRegular(name: name, value: value, named: [])
        }
        return true
    }

    /// The trailers' fields but those no trailer may carry (``ProxyFieldRules/isForbiddenTrailer(_:)``, the
    /// rule HTTP/1.1 clients get too: framing, `Host`, hop-by-hop fields); `nil` when nothing is left to send.
    package static func trailers(_ headers: HTTPHeaders) -> HTTP2HeaderBlock? {
        var block = HTTP2HeaderBlock(for: headers, plusBytes: 0, plusFields: 0)
        // `Connection` is forbidden here, so no field is named by one.
        for (name, value) in headers where !ProxyFieldRules.isForbiddenTrailer(name) {
            FieldBytes.withBytes(of: name, value) { name, value in block.appendRegular(name: name, value: value, named: []) }
        }
        return block.count == 0 ? nil : block
    }

    /// The field names in order (for tests and logs; values are never logged).
    package var names: [String] {
        var result: [String] = []
        var offset = self.flagCapacity
        for index in 0..<self.count {
            let nameLength = self.lengths[2 * index]
            result.append(String(decoding: self.storage[offset..<offset + nameLength], as: UTF8.self))
            offset += nameLength + self.lengths[2 * index + 1]
        }
        return result
    }

    /// A block sized once, for every field of `headers` plus what is appended besides them.
    private init(for headers: HTTPHeaders, plusBytes: Int, plusFields: Int) {
        var size = plusBytes
        for (name, value) in headers { size += name.utf8.count + value.utf8.count }
        self.init(maxFields: headers.count + plusFields, dataBytes: size)
    }

    /// Records one field's lengths and mark (its bytes are appended by the caller).
    private mutating func recordField(nameLength: Int, valueLength: Int, sensitive: Bool) {
        if self.count == self.flagCapacity {
            // More fields than sized for (never expected): one more mark's room before the names and values.
            self.storage.insert(0, at: self.flagCapacity)
            self.flagCapacity += 1
        }
        self.storage[self.count] = sensitive ? 1 : 0
        self.count += 1
        self.lengths.append(nameLength)
        self.lengths.append(valueLength)
    }

    /// Appends `headers` but what HTTP/2 forbids and what their `Connection` names.
    private mutating func appendRegular(_ headers: HTTPHeaders) {
        var named: [[UInt8]] = []
        if ProxyFieldRules.connectionListsNames(headers) {
            for value in headers[canonicalForm: "connection"] { named.append(Array(value.utf8)) }
        }
        for (name, value) in headers {
            FieldBytes.withBytes(of: name, value) { name, value in self.appendRegular(name: name, value: value, named: named) }
        }
    }

    /// Runs for every response: names are lowercased straight into the block and classified by byte
    /// comparison, without a lowercased `String` or a hashed `Set` look-up per field, into a block sized
    /// once beforehand (this used to be a fifth of the allocations of an HTTP/2 request).
    private mutating func appendRegular(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, named: [[UInt8]]) {
        if name.isEmpty || name[0] == UInt8(ascii: ":") { return }
        if Self.hopByHop.contains(name) { return }
        if !named.isEmpty, named.contains(where: { listed in listed.withUnsafeBytes { FieldBytes.equalsIgnoringCase($0, name) } }) {
            return
        }
        let sensitive = Self.sensitive.contains(name)
        self.recordField(nameLength: name.count, valueLength: value.count, sensitive: sensitive)
        // Copied whole, then folded in place: one append rather than one per byte.
        let nameStart = self.storage.count
        self.storage.append(contentsOf: name)
        self.storage.withUnsafeMutableBufferPointer { storage in
            for index in nameStart..<storage.count { storage[index] = FieldBytes.lower(storage[index]) }
        }
        self.storage.append(contentsOf: value)
    }

    private mutating func append(_ name: String, _ value: String, sensitive: Bool) {
        self.recordField(nameLength: name.utf8.count, valueLength: value.utf8.count, sensitive: sensitive)
        self.storage.append(contentsOf: name.utf8)
        self.storage.append(contentsOf: value.utf8)
    }
}
