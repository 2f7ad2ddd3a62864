//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import Testing

@testable import TokengateGateway

/// The line-end scans every head goes through (`memchr` searches and the line-end check, down to the rule it
/// names), against plain byte-by-byte definitions, on every string of up to 7 bytes over CR, LF, NUL and a
/// letter: all the placements of line ends at the edges of a block that the parsers' own tests reach only by
/// example.
@Suite struct HTTP1SyntaxTests {
    private static let alphabet: [UInt8] = [0x0D, 0x0A, 0x00, UInt8(ascii: "a")]

    /// Every byte string of length 0...7 over ``alphabet``.
    private static func allBlocks() -> [[UInt8]] {
        var blocks: [[UInt8]] = [[]]
        var previous: [[UInt8]] = [[]]
        for _ in 1...7 {
            previous = previous.flatMap { block in Self.alphabet.map { block + [$0] } }
            blocks += previous
        }
        return blocks
    }

    /// The first rule the block breaks, scanning byte by byte; `nil` when it is well formed.
    private static func referenceFailure(_ block: [UInt8]) -> HTTP1ParseFailure? {
        for (index, byte) in block.enumerated() {
            if byte == 0x0A, index == 0 || block[index - 1] != 0x0D { return .malformed("a bare LF") }
            if byte == 0x0D, index + 1 >= block.count || block[index + 1] != 0x0A { return .malformed("a bare CR") }
            if byte == 0 { return .malformed("a NUL byte") }
        }
        return nil
    }

    private static func referenceLineEnd(_ block: [UInt8], from start: Int) -> Int? {
        var index = start
        while index + 1 < block.count {
            if block[index] == 0x0D, block[index + 1] == 0x0A { return index }
            index += 1
        }
        return nil
    }

    /// Where a head (or, not starting with a line, a trailer section) that came whole ends: after the first
    /// CRLFCRLF, or after a leading CRLF for a trailer section.
    private static func referenceBlockEnd(_ block: [UInt8], startingWithLine: Bool) -> Int? {
        if !startingWithLine, block.count >= 2, block[0] == 0x0D, block[1] == 0x0A { return 2 }
        var index = 0
        while index + 3 < block.count {
            if block[index...(index + 3)].elementsEqual([0x0D, 0x0A, 0x0D, 0x0A]) { return index + 4 }
            index += 1
        }
        return nil
    }

    @Test func blocksThatCameWholeEndWhereTheByteByByteSearchEndsThem() {
        for block in Self.allBlocks() {
            for startingWithLine in [true, false] {
                var reader = HTTP1LineReader()
                var buffer = ByteBuffer(bytes: block)
                let taken = try? reader.block(from: &buffer, startingWithLine: startingWithLine, limit: 100)
                // A block is taken when it ends, and only when its line ends are well formed.
                let end = Self.referenceBlockEnd(block, startingWithLine: startingWithLine).flatMap {
                    Self.referenceFailure(Array(block[..<$0])) == nil ? $0 : nil
                }
                #expect(taken?.readableBytes == end, "\(block) startingWithLine: \(startingWithLine)")
                if let end {
                    #expect(buffer.readableBytes == block.count - end, "what follows the block stays in the buffer")
                }
            }
        }
    }

    @Test func lineEndScansAgreeWithTheirByteByByteDefinitions() {
        let blocks = Self.allBlocks()
        #expect(blocks.count == 21_845)
        var refused = 0
        for block in blocks {
            block.withUnsafeBytes { bytes in
                var failure: HTTP1ParseFailure?
                do throws(HTTP1ParseFailure) {
                    try HTTP1Syntax.checkLineEnds(bytes)
                } catch {
                    failure = error
                    refused += 1
                }
                #expect(failure == Self.referenceFailure(block), "\(block)")
                for start in 0...block.count {
                    #expect(HTTP1Syntax.lineEnd(bytes, from: start) == Self.referenceLineEnd(block, from: start), "\(block) from \(start)")
                    #expect(HTTP1Syntax.lineEnds(in: bytes, from: start) == block[start...].filter { $0 == 0x0A }.count)
                }
            }
        }
        // Most strings over this alphabet are malformed; both outcomes are exercised.
        #expect(refused > 10_000 && refused < blocks.count)
    }

    @Test func controlBytesInAFieldValueAreRefusedWhereverTheyAre() throws {
        let value = String(repeating: "A", count: 40)
        for position in 0..<40 {
            for control: UInt8 in [0x00, 0x01, 0x0B, 0x1F, 0x7F] {
                var bytes = Array("x: \(value)\r\n\r\n".utf8)
                bytes[3 + position] = control
                bytes.withUnsafeBytes { block in
                    #expect(throws: HTTP1ParseFailure.malformed("control bytes in a field value")) {
                        _ = try HTTP1Syntax.fields(block, from: 0, maxFields: 10)
                    }
                }
            }
        }
        // A tab inside a value is allowed; one at its ends is whitespace and trimmed.
        let fields = try Array("x: \ta\tb\t\r\n\r\n".utf8).withUnsafeBytes { block in
            try HTTP1Syntax.fields(block, from: 0, maxFields: 10)
        }
        #expect(fields.first(name: "x") == "a\tb")
    }
}
