//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import Testing
import TokengateHTTP


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

    /// A backend's response head is kept as its bytes and walked again without checks when it is forwarded
    /// (``HTTP1Syntax/forEachCheckedField(_:from:_:)``): on every block the checking walk accepts, the two must
    /// give the same fields, byte for byte. Generated from pieces that sit at the edges of the rules: names of
    /// every token character class, whitespace around values, colons and obs-text inside values, empty values.
    @Test func theUncheckedWalkReadsEveryAcceptedBlockAsTheCheckingWalkDoes() {
        let names = ["a", "X-Custom", "content-length", "!#$%&'*+-.^_`|~09", "Set-Cookie", "x y", "", "é"]
        let separators = [":", ": ", ":\t", ":  \t ", " :"]
        let values: [[UInt8]] = [
            [], Array("v".utf8), Array("a b".utf8), Array("\tx\t".utf8), Array("a:b: c".utf8), Array(" trailing  ".utf8),
            [0x80, 0xFF, 0x20, 0xC3, 0xA9], Array("x\ty".utf8), [0x7F], Array("\r".utf8),
        ]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15  // A fixed seed: the same blocks every run.
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        var accepted = 0
        for _ in 0..<20_000 {
            var block: [UInt8] = []
            for _ in 0..<next(5) {
                block += Array(names[next(names.count)].utf8) + Array(separators[next(separators.count)].utf8)
                block += values[next(values.count)] + [0x0D, 0x0A]
            }
            block += [0x0D, 0x0A]
            block.withUnsafeBytes { bytes in
                var checked: [[UInt8]] = []
                do {
                    try HTTP1Syntax.forEachField(bytes, from: 0, maxFields: 10) { name, value throws(HTTP1ParseFailure) in
                        checked += [Array(bytes[name]), Array(bytes[value])]
                    }
                } catch {
                    return
                }
                accepted += 1
                var unchecked: [[UInt8]] = []
                HTTP1Syntax.forEachCheckedField(bytes, from: 0) { name, value in unchecked += [Array(name), Array(value)] }
                #expect(unchecked == checked, "\(String(decoding: block, as: UTF8.self).debugDescription)")
            }
        }
        #expect(accepted > 2_000 && accepted < 20_000, "both outcomes are exercised: \(accepted) accepted")
    }
}
