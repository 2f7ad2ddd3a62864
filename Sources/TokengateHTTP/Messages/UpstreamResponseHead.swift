//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1

/// What ``HTTP1ResponseParser`` reads off an upstream connection: the head as the bytes it came in, body
/// parts, the end with its trailers.
package typealias UpstreamResponsePart = HTTPPart<UpstreamResponseHead, ByteBuffer>

/// A backend's response head as it arrived: the status line read, the field lines kept as the bytes they
/// came in (``HTTP1ResponseParser`` checked them).
///
/// Every response passes through here on its way to a client, and nearly all of its fields go on unchanged.
/// Making a `String` per name and value, an `HTTPHeaders` and an `HTTPResponseHead` out of them (three
/// allocations per response, and one more per value longer than 15 bytes, such as `Date`) only to write the
/// same bytes out again was most of the cost of a response head. The client side now copies the lines it keeps
/// straight from these bytes (``ProxyFieldRules/forEachClientResponseField(of:close:hsts:added:_:)``).
///
/// The block is a slice of the buffer the backend's bytes were read into: it lives as long as the head, which
/// is written to the client by the end of the read batch that parsed it (``ProxyExchange`` holds it that long)
/// and not kept.
package struct UpstreamResponseHead: Equatable {
    package var version: HTTPVersion
    package var status: HTTPResponseStatus
    /// How many field lines the head has.
    package let fieldCount: Int
    /// A `Connection` field may name other fields (``HTTP1Syntax/FramingFields/connectionNamesFields``).
    package let connectionNamesFields: Bool
    /// The whole head: status line, field lines, the empty line.
    private let block: ByteBuffer
    /// Where the field lines start in ``block``.
    private let fieldsStart: Int

    /// `block` must be a head that ``HTTP1Syntax/forEachField(_:from:maxFields:_:)`` accepted from `fieldsStart`.
    package init(
        version: HTTPVersion,
        status: HTTPResponseStatus,
        checkedBlock block: ByteBuffer,
        fieldsStart: Int,
        fieldCount: Int,
        connectionNamesFields: Bool
    ) {
        self.version = version
        self.status = status
        self.block = block
        self.fieldsStart = fieldsStart
        self.fieldCount = fieldCount
        self.connectionNamesFields = connectionNamesFields
    }

    /// The size of the field lines with their separators: at least what the kept fields take to write again.
    package var fieldBytes: Int { self.block.readableBytes - self.fieldsStart }

    /// Each field's name and value (without the whitespace around it), in order, as raw bytes valid only
    /// during the call.
    package func forEachField(_ body: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void) {
        self.block.withUnsafeReadableBytes { bytes in
            HTTP1Syntax.forEachCheckedField(bytes, from: self.fieldsStart, body)
        }
    }
}
