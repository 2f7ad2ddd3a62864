//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1

/// A client request's header fields as the request logic reads them: `name: value` lines in one byte array,
/// in the order the client sent them.
///
/// Every forwarded request used to carry an `HTTPRequestHead`: a storage object, an array of name and value
/// pairs, and a `String` for every value longer than 15 bytes (the token's `Authorization`, `User-Agent`,
/// `Accept`, cookies), made only to be compared and written out again as bytes. Here a request's fields cost
/// one allocation whatever their number; look-ups compare bytes in place, the rewriter copies the lines it
/// keeps straight from here, and a header token is verified where it lies (``TokenExtractor``).
///
/// The lines are copied out of the buffer they were read into, not sliced from it: the TLS layer lends its
/// read buffer to every connection of its thread (``TLSScratchBuffers``), and an exchange that kept a slice
/// until its backend answered would make every other read on the thread allocate a fresh one.
///
/// Invariant: every line is `token ":" OWS value OWS CRLF` with no CR, LF or NUL in the value. The HTTP/1.1
/// parser keeps only lines it checked so (``HTTP1Syntax/forEachField(_:from:maxFields:_:)``); HTTP/2 fields
/// were checked by nghttp2 (lowercase token names, no CR, LF or NUL) and are written out here as such lines.
package struct RequestFields: Equatable, Sendable {
    /// The field lines, each ending with CRLF; no empty line after the last.
    package private(set) var bytes: [UInt8]
    /// How many fields there are.
    package private(set) var count: Int
    /// A `Connection` field says more than `keep-alive` or `close`, so it may name other fields, which are
    /// hop-by-hop too (``HTTP1Syntax/FramingFields/connectionNamesFields``): noted as the lines are taken in,
    /// so the rewriter looks for such names only in the rare request that has them.
    package private(set) var connectionNamesFields = false

    package init() {
        self.bytes = []
        self.count = 0
    }

    /// `lines` must be field lines that ``HTTP1Syntax/forEachField(_:from:maxFields:_:)`` accepted, without
    /// the empty line that ends a head; `connectionNamesFields` as the parse pass found it.
    package init(checkedLines lines: [UInt8], count: Int, connectionNamesFields: Bool) {
        self.bytes = lines
        self.count = count
        self.connectionNamesFields = connectionNamesFields
    }

    /// Room for `byteCount` more bytes of lines, so that a head written field by field grows its storage once.
    package mutating func reserveCapacity(_ byteCount: Int) {
        self.bytes.reserveCapacity(byteCount)
    }

    /// Appends one field. `name` must be a token and `value` must hold no CR, LF or NUL: HPACK fields that
    /// nghttp2 checked, or values the gateway made itself.
    package mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        if FieldBytes.equalsIgnoringCase(name, "connection") {
            var framing = HTTP1Syntax.FramingFields()
            try? framing.add(name: name, value: value)
            self.connectionNamesFields = self.connectionNamesFields || framing.connectionNamesFields
        }
        self.bytes.append(contentsOf: name)
        self.bytes.append(UInt8(ascii: ":"))
        self.bytes.append(UInt8(ascii: " "))
        self.bytes.append(contentsOf: value)
        self.bytes.append(0x0D)
        self.bytes.append(0x0A)
        self.count += 1
    }

    /// Puts a field in front of the others (the host of an HTTP/2 request, which comes as `:authority`).
    package mutating func prepend(name: String, value: String) {
        FieldBytes.withBytes(of: name, value) { name, value in
            let length = name.count + value.count + 4
            // Room made once (one move of the lines after it), then the line written into it.
            self.bytes.insert(contentsOf: repeatElement(0, count: length), at: 0)
            self.bytes.withUnsafeMutableBytes { lines in
                UnsafeMutableRawBufferPointer(rebasing: lines[0..<name.count]).copyMemory(from: name)
                lines[name.count] = UInt8(ascii: ":")
                lines[name.count + 1] = UInt8(ascii: " ")
                UnsafeMutableRawBufferPointer(rebasing: lines[name.count + 2..<length - 2]).copyMemory(from: value)
                lines[length - 2] = 0x0D
                lines[length - 1] = 0x0A
            }
        }
        self.count += 1
    }

    /// ``add(name:value:)`` for a field held as strings.
    package mutating func add(name: String, value: String) {
        FieldBytes.withBytes(of: name, value) { name, value in self.add(name: name, value: value) }
    }

    // MARK: Reading the fields.

    /// Each field's name and value (without the whitespace around the value), in order, as raw bytes valid
    /// only during the call.
    package func forEach(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void) {
        self.bytes.withUnsafeBytes { lines in HTTP1Syntax.forEachCheckedField(lines, from: 0, body) }
    }

    /// Where the values of the fields called `name` (any case) lie in ``bytes``, in order.
    package func valueRanges(name: UnsafeRawBufferPointer) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        self.bytes.withUnsafeBytes { lines in
            HTTP1Syntax.forEachCheckedField(lines, from: 0) { fieldName, value in
                if FieldBytes.equalsIgnoringCase(fieldName, name) {
                    ranges.append(Self.range(of: value, in: lines))
                }
            }
        }
        return ranges
    }

    /// Where the value of the first field called `name` lies in ``bytes``, and how many fields have that name.
    package func firstValueRange(name: StaticString) -> (range: Range<Int>, count: Int)? {
        let name = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        var first: Range<Int>?
        var count = 0
        self.bytes.withUnsafeBytes { lines in
            HTTP1Syntax.forEachCheckedField(lines, from: 0) { fieldName, value in
                guard FieldBytes.equalsIgnoringCase(fieldName, name) else { return }
                count += 1
                if first == nil { first = Self.range(of: value, in: lines) }
            }
        }
        return first.map { ($0, count) }
    }

    /// `body` with the value of the first field called `name` (a lowercase literal), `nil` when there is none.
    package func withFirstValue<Result>(name: StaticString, _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        guard let (range, _) = self.firstValueRange(name: name) else { return nil }
        return self.bytes.withUnsafeBytes { lines in body(UnsafeRawBufferPointer(rebasing: lines[range])) }
    }

    /// The value of the first field called `name` (a lowercase literal) as a string: for the paths that need
    /// one (routing by host, the token page); the hot ones read bytes.
    package func first(name: StaticString) -> String? {
        self.withFirstValue(name: name) { String(decoding: $0, as: UTF8.self) }
    }

    /// How many fields are called `name` (a lowercase literal).
    package func count(name: StaticString) -> Int {
        self.firstValueRange(name: name)?.count ?? 0
    }

    /// The request says `Expect: 100-continue` (the only expectation there is, RFC 9110 §10.1.1): its client waits
    /// for a `100 Continue` before it sends the body.
    package var expectsContinue: Bool {
        self.withFirstValue(name: "expect") { FieldBytes.equalsIgnoringCase($0, "100-continue") } ?? false
    }

    package func contains(name: StaticString) -> Bool {
        self.firstValueRange(name: name) != nil
    }

    /// The values of the fields called `name` (any case), as strings.
    package func values(name: String) -> [String] {
        var name = name
        let ranges = name.withUTF8 { self.valueRanges(name: UnsafeRawBufferPointer($0)) }
        return ranges.map { String(decoding: self.bytes[$0], as: UTF8.self) }
    }

    /// The fields as NIO's header list, for the paths that take one (the token page). Allocates per field.
    package var headers: HTTPHeaders {
        var pairs: [(String, String)] = []
        pairs.reserveCapacity(self.count)
        self.forEach { name, value in
            pairs.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
        }
        return HTTPHeaders(pairs)
    }

    /// Where `part` (a name or value handed out by a walk over the lines) lies in `whole` (the lines).
    package static func range(of part: UnsafeRawBufferPointer, in whole: UnsafeRawBufferPointer) -> Range<Int> {
        guard let start = part.baseAddress, let base = whole.baseAddress else { return 0..<0 }
        let offset = base.distance(to: start)
        return offset..<offset + part.count
    }
}
