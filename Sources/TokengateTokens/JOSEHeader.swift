//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The header members tokengate reads, as spans of the decoded header.
struct JOSEHeader {
    var algorithm: ByteSpan
    var keyID: ByteSpan?

    /// At most this many members in a header or payload. Names are kept on the stack to detect duplicates
    /// (RFC 7515 §5.2 step 4 allows rejecting them; tokengate always does), so the number is bounded.
    static let maxMembers = 64

    @inline(__always)
    static func named(_ name: ByteSpan, _ literal: StaticString, _ scanner: JSONScanner) -> Bool {
        literal.withUTF8Buffer { scanner.equals(name, $0) }
    }

    /// Parses a header object. Nil when it is not a JSON object, has duplicate or too many members, has no
    /// string `alg`, has a non-string `kid`, has trailing bytes, or has `crit` (tokengate understands no
    /// extension, so RFC 7515 §4.1.11 requires rejecting any `crit`, including an empty one).
    static func parse(_ scanner: inout JSONScanner) -> JOSEHeader? {
        guard scanner.consume(UInt8(ascii: "{")) else { return nil }
        return withUnsafeTemporaryAllocation(of: ByteSpan.self, capacity: Self.maxMembers) { names -> JOSEHeader? in
            var count = 0
            var algorithm: ByteSpan?
            var keyID: ByteSpan?
            var first = true
            while true {
                switch scanner.nextMember(first: &first) {
                case .error:
                    return nil
                case .end:
                    guard scanner.atEnd(), let algorithm else { return nil }
                    return JOSEHeader(algorithm: algorithm, keyID: keyID)
                case .member(let name):
                    guard count < Self.maxMembers else { return nil }
                    for i in 0..<count where scanner.equals(names[i], name) { return nil }
                    names[count] = name
                    count += 1
                    if Self.named(name, "alg", scanner) {
                        guard let value = scanner.parseString() else { return nil }
                        algorithm = value
                    } else if Self.named(name, "kid", scanner) {
                        guard let value = scanner.parseString() else { return nil }
                        keyID = value
                    } else if Self.named(name, "crit", scanner) {
                        return nil
                    } else {
                        guard scanner.skipValue(depth: 1) else { return nil }
                    }
                }
            }
        }
    }
}
