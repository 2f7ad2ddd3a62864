//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// Inputs built to hurt the loader: each must be refused quickly with a positioned error, never crash or hang.
@Suite("Hostile input", .timeLimit(.minutes(1)))
struct HostileInputTests {
    @Test("a 10 MB document is refused before parsing")
    func hugeText() {
        let yaml = minimalYAML + "# " + String(repeating: "x", count: 10 * 1024 * 1024) + "\n"
        let error = parseError(yaml)
        #expect(error?.code == .tooLarge)
        #expect(error?.description == "test.yaml: the configuration is larger than 1024 KiB")
    }

    @Test("a 10 MB file is refused after reading at most 1 MiB + 1 byte")
    func hugeFile() throws {
        let directory = try TemporaryDirectory()
        try directory.write("big.yaml", bytes: [UInt8](repeating: UInt8(ascii: "#"), count: 10 * 1024 * 1024))
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: directory.path + "/big.yaml", checkFiles: false)
        }
        #expect(error?.code == .tooLarge)
    }

    @Test("an endless file (/dev/zero) is refused, not read forever")
    func endlessFile() {
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: "/dev/zero", checkFiles: false)
        }
        #expect(error?.code == .tooLarge)
    }

    @Test("deep flow nesting is refused at the first level too many")
    func deepFlowNesting() {
        let yaml = "listen: " + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "\n"
        let error = parseError(yaml)
        #expect(error?.code == .tooComplex)
        // The root mapping is level 1, so the 32nd "[" (column 9 + 31) is the 33rd level.
        #expect(error?.description == "test.yaml:1:40: the document is nested more than 32 levels deep")
    }

    @Test("200,000 nested brackets are refused by libyaml's own scanner limit, in the same words")
    func veryDeepFlowNesting() {
        let yaml = "listen: " + String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000) + "\n"
        let error = parseError(yaml)
        #expect(error?.code == .tooComplex)
        #expect(error?.line == 1)
        #expect(error?.message == "the document is nested more than 32 levels deep")
    }

    @Test("deep block nesting is refused too")
    func deepBlockNesting() {
        var yaml = ""
        for depth in 0..<100 {
            yaml += String(repeating: "  ", count: depth) + "k\(depth):\n"
        }
        yaml += String(repeating: "  ", count: 100) + "leaf\n"
        let error = parseError(yaml)
        #expect(error?.code == .tooComplex)
        #expect(error?.line == 33)
    }

    @Test("compact nested sequences on one line are refused")
    func compactSequences() {
        let yaml = "listen:\n" + String(repeating: "- ", count: 50_000) + "x\n"
        #expect(parseError(yaml)?.code == .tooComplex)
    }

    @Test("nesting within the bound is fine and reported as a type error")
    func shallowNestingIsOnlyATypeError() {
        let yaml = "listen: [[[[1]]]]\n"
        #expect(parseError(yaml)?.description == "test.yaml:1:10: listen[0]: expected a mapping, got a list")
    }

    /// Nine levels of nine aliases each: a few hundred bytes that expand to 9^9 (387 million) nodes.
    static let billionLaughs = """
        a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
        b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
        c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
        d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
        e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
        f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
        g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
        h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
        i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]

        """

    @Test("an alias bomb is refused before it is expanded")
    func aliasBomb() {
        let error = parseError(Self.billionLaughs)
        #expect(error?.code == .tooComplex)
        // Level f is the first whose expansion passes 200,000 nodes (e: 7,381 per alias, f: 66,430 per alias).
        #expect(error?.line == 6)
        #expect(error?.message == "the document expands to more than 200000 nodes (too many aliases?)")
    }

    @Test("an alias bomb used as mapping keys (which the composer hashes) is refused at the key")
    func aliasBombAsKeys() {
        // Levels a to e expand to 74,738 nodes in all; one *e key adds 66,430 (allowed), the next two pass 200,000.
        let levels = Self.billionLaughs.split(separator: "\n").prefix(5).joined(separator: "\n")
        let yaml = levels + "\n? *e\n: x\n? [*e, *e]\n: y\n"
        let error = parseError(yaml)
        #expect(error?.code == .tooComplex)
        #expect(error?.line == 8)
    }

    @Test("ordinary anchors and aliases still work")
    func smallAliases() throws {
        let yaml = minimalYAML.replacingOccurrences(
            of: "  api: { targets: [ \"http://127.0.0.1:9000\" ] }",
            with: "  api: &pool { targets: [ \"http://127.0.0.1:9000\" ], connect_timeout: 1s }\n  api2: *pool"
        )
        let config = try parse(yaml)
        #expect(config.upstreams["api2"]?.targets == config.upstreams["api"]?.targets)
        #expect(config.upstreams["api2"]?.connectTimeout == .seconds(1))
        #expect(config.upstreams["api2"]?.name == "api2")
    }

    @Test("an undefined alias is a positioned error")
    func undefinedAlias() {
        let error = parseError(minimalYAML + "realm: *nothing\n")
        #expect(error?.code == .syntax)
        #expect(error?.line == 11)
    }

    @Test("non-UTF-8 bytes are reported with their position")
    func invalidUTF8() throws {
        let directory = try TemporaryDirectory()
        var bytes = Array("listen:\n  - address: ".utf8)
        bytes += [0xFF, 0xFE]
        bytes += Array(":8443\n".utf8)
        try directory.write("latin.yaml", bytes: bytes)
        let path = directory.path + "/latin.yaml"
        let error = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: path, checkFiles: false)
        }
        #expect(error?.code == .encoding)
        #expect(error?.description == "\(path):2:14: the configuration is not valid UTF-8 (invalid byte at offset 21)")
    }

    @Test("overlong and surrogate UTF-8 encodings are refused")
    func sneakyUTF8() {
        for bad: [UInt8] in [[0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE2, 0x82]] {
            let bytes = Array("realm: ".utf8) + bad
            #expect(throws: ConfigurationError.self) {
                try GatewayConfiguration.decodeUTF8(bytes, file: "x.yaml")
            }
        }
    }

    @Test("a byte-order mark is fine")
    func byteOrderMark() throws {
        let config = try parse("\u{FEFF}" + minimalYAML)
        #expect(config.routes.count == 2)
        #expect(parseError("\u{FEFF}listen: 1\n")?.description == "test.yaml:1:9: listen: expected a list, got a scalar")
    }

    @Test("CRLF line ends are fine")
    func crlf() throws {
        let crlf = minimalYAML.replacingOccurrences(of: "\n", with: "\r\n")
        let config = try parse(crlf)
        #expect(config.routes.count == 2)
        let error = parseError(crlf + "realm: \"\"\r\n")
        #expect(error?.description == "test.yaml:11:8: realm: must not be empty")
    }

    @Test("control characters and NUL are refused by the YAML reader")
    func controlCharacters() {
        let error = parseError(minimalYAML + "realm: a\u{0}b\n")
        #expect(error?.code == .syntax)
        #expect(error?.line == 11)
        #expect(parseError(minimalYAML + "realm: a\u{7}b\n")?.code == .syntax)
    }

    @Test("a second document, explicit tags, merge keys and complex keys are refused")
    func unsupportedYAML() {
        let second = parseError(minimalYAML + "---\nrealm: x\n")
        #expect(second?.code == .unsupportedYAML)
        #expect(second?.line == 11)
        #expect(
            parseError(minimalYAML + "realm: !!str x\n")?.description
                == "test.yaml:11:8: explicit YAML tags (!, !!str, ...) are not supported in the configuration"
        )
        #expect(parseError(minimalYAML + "realm: !custom x\n")?.code == .unsupportedYAML)
        let merge = minimalYAML.replacingOccurrences(
            of: "  api: { targets: [ \"http://127.0.0.1:9000\" ] }",
            with: "  base: &b { targets: [ \"http://127.0.0.1:9000\" ] }\n  api: { <<: *b }"
        )
        #expect(
            parseError(merge)?.description
                == "test.yaml:8:10: upstreams.api.<<: unknown key (YAML merge keys are not supported)"
        )
        #expect(
            parseError(minimalYAML + "? [a, b]\n: c\n")?.description
                == "test.yaml:11:3: mapping keys must be plain strings"
        )
    }

    @Test("oversized lists and values are refused")
    func oversizedCollections() {
        var routes = "routes:\n"
        for index in 0..<1001 {
            routes += "  - { path_prefix: /r\(index)/, upstream: api, accept: none }\n"
        }
        let yaml = minimalYAML.components(separatedBy: "routes:\n")[0] + routes
        #expect(parseError(yaml)?.description == "test.yaml:9:3: routes: at most 1000 items, got 1001")
        let longRealm = parseError(minimalYAML + "realm: " + String(repeating: "r", count: 100_000) + "\n")
        #expect(longRealm?.description == "test.yaml:11:8: realm: longer than 256 bytes")
    }

    @Test("values echoed in messages are clipped and escaped")
    func clippedSummaries() {
        let long = String(repeating: "z", count: 500)
        let error = parseError(minimalYAML + "log: { level: \"\(long)\\n\" }\n")
        #expect(
            error?.message == "expected one of trace, debug, info, notice, warning, error, critical, got "
                + String(repeating: "z", count: 60) + "…"
        )
        let newline = parseError(minimalYAML + "log: { level: \"a\\nb\" }\n")
        #expect(
            newline?.message == "expected one of trace, debug, info, notice, warning, error, critical, got a\\u{a}b"
        )
    }

    @Test("missing, unreadable and directory paths fail cleanly")
    func unreadablePaths() throws {
        let missing = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: "/nonexistent/tokengate.yaml")
        }
        #expect(missing?.description == "/nonexistent/tokengate.yaml: cannot open the configuration: no such file")
        let directory = try TemporaryDirectory()
        let isDirectory = #expect(throws: ConfigurationError.self) {
            try GatewayConfiguration.load(path: directory.path)
        }
        #expect(isDirectory?.code == .io)
    }
}
