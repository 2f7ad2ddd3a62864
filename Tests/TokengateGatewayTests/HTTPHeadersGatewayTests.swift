//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import Testing
import TokengateHTTP

@testable import TokengateGateway

@Suite struct HTTPHeadersGatewayTests {
    @Test(arguments: [
        ("Content-Length", "content-length", true),
        ("CONTENT-LENGTH", "content-length", true),
        ("content-length", "content-lengtH", true),
        ("content-length", "content-lengti", false),
        ("content-length", "content-length ", false),
        ("", "", true),
        // Only ASCII letters fold: other bytes must match exactly.
        ("x-é", "X-É", false),
        ("x-é", "X-é", true),
        ("a[", "A{", false),
        ("x-a-rather-long-field-name-beyond-small-strings", "X-A-Rather-Long-Field-Name-Beyond-Small-Strings", true),
        ("x-a-rather-long-field-name-beyond-small-strings", "X-A-Rather-Long-Field-Name-Beyond-Small-Stringz", false),
    ])
    func namesCompareIgnoringASCIICaseOnly(_ a: String, _ b: String, _ equal: Bool) {
        #expect(HTTPHeaders.equalsIgnoringCase(a, b) == equal)
        #expect(HTTPHeaders.equalsIgnoringCase(b, a) == equal)
        // A string sliced out of a larger one compares the same.
        let sliced = String(("<" + a + ">").dropFirst().dropLast())
        #expect(HTTPHeaders.equalsIgnoringCase(sliced, b) == equal)
    }

    @Test(arguments: [
        ("close", true), ("Close", true), ("keep-alive, Close", true), (" close ", true), ("x,close,y", true),
        ("x , close\t, y", true), ("closed", false), ("clos", false), ("", false), ("keep-alive", false),
        ("c lose", false), ("close x", false), (",,", false),
    ])
    func connectionTokensAreFoundWithoutSplitting(_ value: String, _ found: Bool) {
        var value = value
        #expect(value.withUTF8 { FieldBytes.listContains(UnsafeRawBufferPointer($0), token: "close") } == found, "\(value)")
    }

    @Test(arguments: [
        ("X-A", ["X-A"]), (" x-a ,\tX-B\t", ["x-a", "X-B"]), (",,x-a,, ,", ["x-a"]), ("", []), (" , ", []),
        ("a b, c", ["a b", "c"]),
    ])
    func connectionListsAreSplitOnCommasWithoutTheirWhitespace(_ value: String, _ elements: [String]) {
        var value = value
        let split = value.withUTF8 { FieldBytes.listElements(UnsafeRawBufferPointer($0)) }
        #expect(split.map { String(decoding: $0, as: UTF8.self) } == elements, "\(value)")
    }
}
