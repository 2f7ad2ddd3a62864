//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Random pieces of HTTP/1.1 messages for the parsers' differential tests against llhttp: the parts requests
/// and responses share (field lines, bodies framed by length or in chunks with extensions and trailers).
enum HTTP1Generated {
    static let tokenBytes = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_!#$%&'*+.^`|~".utf8)

    /// `count` bytes drawn from `bytes`, as text.
    static func text(_ count: ClosedRange<Int>, of bytes: ClosedRange<UInt8>, using generator: inout SystemRandomNumberGenerator) -> String {
        String(decoding: (0..<Int.random(in: count, using: &generator)).map { _ in UInt8.random(in: bytes, using: &generator) }, as: UTF8.self)
    }

    /// Up to six `name: value` lines with token names and visible values, none named in `excluded` (lowercase).
    static func fieldLines(excluding excluded: Set<String>, using generator: inout SystemRandomNumberGenerator) -> String {
        var lines = ""
        for _ in 0..<Int.random(in: 0...6, using: &generator) {
            let name = String(decoding: (0..<Int.random(in: 1...12, using: &generator)).map { _ in Self.tokenBytes.randomElement(using: &generator)! }, as: UTF8.self)
            if excluded.contains(name.lowercased()) { continue }
            lines += "\(name): \(Self.text(0...20, of: 0x21...0x7E, using: &generator))\r\n"
        }
        return lines
    }

    /// `Transfer-Encoding: chunked`, the end of the head, then `body` in chunks of at most `maxChunk` bytes (some
    /// with an extension), the last chunk and sometimes a trailer.
    static func chunked(_ body: String, maxChunk: Int, using generator: inout SystemRandomNumberGenerator) -> String {
        var text = "Transfer-Encoding: chunked\r\n\r\n"
        var rest = Substring(body)
        while !rest.isEmpty {
            let size = min(rest.utf8.count, Int.random(in: 1...maxChunk, using: &generator))
            let chunk = rest.prefix(size)
            rest = rest.dropFirst(size)
            text += String(chunk.utf8.count, radix: 16) + (Bool.random(using: &generator) ? ";ext=1" : "") + "\r\n" + chunk + "\r\n"
        }
        return text + "0\r\n" + (Bool.random(using: &generator) ? "X-Trailer: done\r\n" : "") + "\r\n"
    }
}

extension String {
    /// Without trailing spaces and tabs: llhttp keeps a field value's trailing whitespace, which is not part of
    /// the value (RFC 9110 §5.5), so values are compared without it.
    func trimmingTrailingBlanks() -> Substring {
        var end = self.endIndex
        while end > self.startIndex, self[self.index(before: end)] == " " || self[self.index(before: end)] == "\t" {
            end = self.index(before: end)
        }
        return self[..<end]
    }
}
