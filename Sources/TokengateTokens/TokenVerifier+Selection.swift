//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: Scopes and forwarded claims (``ClaimSelection``), read while the payload is parsed.

extension TokenVerifier {
    /// Whether a member is `scope` (RFC 8693 §4.2, RFC 9068 §2.2.3: one string of space-separated names) or
    /// `scp` (the array some providers send instead).
    @inline(__always)
    static func isScopeClaim(_ name: ByteSpan, scanner: JSONScanner) -> Bool {
        ("scope" as StaticString).withUTF8Buffer { scanner.equals(name, $0) }
            || ("scp" as StaticString).withUTF8Buffer { scanner.equals(name, $0) }
    }

    /// The index of a member in ``Prepared/forwardedNames``, if it is one.
    @inline(__always)
    func forwardedIndex(_ name: ByteSpan, scanner: JSONScanner) -> Int? {
        let names = self.prepared.forwardedNames
        for index in names.indices where names[index].withUnsafeBufferPointer({ scanner.equals(name, $0) }) {
            return index
        }
        return nil
    }

    /// Sets the bit of every selected scope named in `text`, a run of names separated by spaces. Allocation-free;
    /// at most one compare per selected scope per name.
    private func grant(_ text: ByteSpan, into selected: inout SelectedClaims, scanner: JSONScanner) {
        let names = self.prepared.scopeNames
        let end = text.start + text.count
        var start = text.start
        while start < end {
            var stop = start
            while stop < end, scanner.base[stop] != UInt8(ascii: " ") { stop += 1 }
            if stop > start {
                let word = ByteSpan(start: start, count: stop - start)
                for index in names.indices where names[index].withUnsafeBufferPointer({ scanner.equals(word, $0) }) {
                    selected.scopes |= 1 << UInt64(index)
                    break
                }
            }
            start = stop + 1
        }
    }

    /// `scope` or `scp`: a string of space-separated names, or an array of strings. Any other value grants
    /// nothing (a route that requires a scope then refuses the token; one that requires none never asks).
    /// False only for JSON that is not well-formed.
    func readScopes(into selected: inout SelectedClaims, scanner: inout JSONScanner) -> Bool {
        guard let next = scanner.peek() else { return false }
        switch next {
        case UInt8(ascii: "\""):
            guard let text = scanner.parseString() else { return false }
            self.grant(text, into: &selected, scanner: scanner)
            return true
        case UInt8(ascii: "["):
            scanner.position += 1
            if scanner.consume(UInt8(ascii: "]")) { return true }
            while true {
                if scanner.peek() == UInt8(ascii: "\"") {
                    guard let text = scanner.parseString() else { return false }
                    self.grant(text, into: &selected, scanner: scanner)
                } else {
                    guard scanner.skipValue(depth: 2) else { return false }
                }
                if scanner.consume(UInt8(ascii: "]")) { return true }
                guard scanner.consume(UInt8(ascii: ",")) else { return false }
            }
        default:
            return scanner.skipValue(depth: 1)
        }
    }

    /// A forwarded claim's value: a string, number or boolean as its text, an array of those joined with one
    /// space, `null` as absent. An object, a nested array, a control character (tab included), a leading or
    /// trailing space, or more than ``ClaimSelection/maxForwardedValueBytes`` marks the claim unforwardable
    /// instead: judged per route, so only a route that forwards it refuses the token. A forwarded `scope` or
    /// `scp` also grants its scopes. False only for JSON that is not well-formed.
    func readForwarded(
        _ index: Int, name: ByteSpan, into selected: inout SelectedClaims, scanner: inout JSONScanner
    ) -> Bool {
        let scopes = !self.prepared.scopeNames.isEmpty && Self.isScopeClaim(name, scanner: scanner)
        let limit = ClaimSelection.maxForwardedValueBytes
        var value: [UInt8] = []
        var unforwardable = false
        var first = true
        func append(_ start: Int, _ count: Int) {
            let added = (first ? 0 : 1) + count
            guard !unforwardable, value.count + added <= limit else {
                unforwardable = true
                return
            }
            if !first { value.append(UInt8(ascii: " ")) }
            first = false
            value.append(contentsOf: UnsafeBufferPointer(start: scanner.base + start, count: count))
        }
        /// One string, number or boolean; false for invalid JSON; nil when it is none of these (skipped).
        func scalar(depth: Int) -> Bool? {
            guard let next = scanner.peek() else { return false }
            switch next {
            case UInt8(ascii: "\""):
                guard let text = scanner.parseString() else { return false }
                if scopes { self.grant(text, into: &selected, scanner: scanner) }
                append(text.start, text.count)
                return true
            case UInt8(ascii: "t"), UInt8(ascii: "f"), UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                // The JSON text as sent: `true`, `false`, or the number (validated, ASCII).
                let start = scanner.position
                guard scanner.skipValue(depth: depth) else { return false }
                append(start, scanner.position - start)
                return true
            default:
                return nil
            }
        }
        var present = true
        guard let next = scanner.peek() else { return false }
        switch next {
        case UInt8(ascii: "n"):
            guard scanner.skipValue(depth: 1) else { return false }
            present = false
        case UInt8(ascii: "["):
            scanner.position += 1
            if !scanner.consume(UInt8(ascii: "]")) {
                while true {
                    switch scalar(depth: 2) {
                    case .some(true): break
                    case .some(false): return false
                    case .none:
                        unforwardable = true
                        guard scanner.skipValue(depth: 2) else { return false }
                    }
                    if scanner.consume(UInt8(ascii: "]")) { break }
                    guard scanner.consume(UInt8(ascii: ",")) else { return false }
                }
            }
        default:
            switch scalar(depth: 1) {
            case .some(true): break
            case .some(false): return false
            case .none:
                unforwardable = true
                guard scanner.skipValue(depth: 1) else { return false }
            }
        }
        guard present else { return true }
        if !unforwardable {
            // What HTTP would read differently: a control byte (a line break splits a header, a NUL ends it in C)
            // or an edge space (trimmed, so the backend would see another value).
            for byte in value where byte < 0x20 || byte == 0x7F { unforwardable = true }
            // The C1 controls (U+0080–U+009F, `C2 80`–`C2 9F` in UTF-8): NEL ends a line for some readers.
            for offset in value.indices.dropLast() where value[offset] == 0xC2 && (0x80...0x9F).contains(value[offset + 1]) {
                unforwardable = true
            }
            if value.first == UInt8(ascii: " ") || value.last == UInt8(ascii: " ") { unforwardable = true }
        }
        if unforwardable {
            selected.unforwardable |= 1 << UInt32(index)
            return true
        }
        if selected.forwarded.isEmpty {
            selected.forwarded = Array(repeating: nil, count: self.prepared.forwardedNames.count)
        }
        selected.forwarded[index] = String(decoding: value, as: UTF8.self)
        return true
    }
}
