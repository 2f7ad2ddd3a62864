//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A field sent on every request besides the ones the bench sets itself (`--header 'Name: value'`): what a
/// real client's requests carry (a browser-like `User-Agent`, `Accept-Language`, an app version), which a
/// gateway parses, checks and forwards like any other field. `bench-compare.sh --app-fields` sends the same
/// fields from wrk and h2load.
///
/// Checked when parsed, so a typo cannot turn into a malformed request that measures the gateway's refusal
/// instead of its forwarding: the name is an RFC 9110 token, the value has no control bytes but HTAB, and the
/// fields that frame the request or carry its token stay the bench's own.
struct ExtraField: Sendable, Equatable {
    let name: String
    let value: String

    static let maxValueBytes = 8 * 1024
    /// Set by the bench for every request (or by HTTP/2 itself): a second one would change what is measured.
    static let reserved: Set<String> = [
        "host", "authorization", "content-length", "content-type", "transfer-encoding", "connection", "keep-alive",
        "te", "upgrade", "proxy-connection", "http2-settings", "expect",
    ]

    init(parsing text: String) throws {
        func refuse(_ why: String) -> BenchError {
            BenchError("invalid_field", "--header '\(text.prefix(80))': \(why)")
        }
        guard let colon = text.utf8.firstIndex(of: UInt8(ascii: ":")) else {
            throw refuse("not 'Name: value'")
        }
        let name = String(text[..<colon])
        // Optional whitespace around the value is not part of it (RFC 9110 §5.5).
        let isOWS: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        let value = String(String(text[text.index(after: colon)...].drop(while: isOWS).reversed().drop(while: isOWS)).reversed())
        guard !name.isEmpty, name.utf8.count <= 64, name.utf8.allSatisfy(Self.isTokenByte) else {
            throw refuse("the name must be 1 to 64 letters, digits or !#$%&'*+-.^_`|~")
        }
        guard !Self.reserved.contains(name.lowercased()) else {
            throw refuse("\(name) is set by the bench itself")
        }
        guard value.utf8.count <= Self.maxValueBytes else {
            throw refuse("the value is over \(Self.maxValueBytes) bytes")
        }
        guard value.utf8.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw refuse("the value holds a control byte")
        }
        self.name = name
        self.value = value
    }

    /// RFC 9110 §5.6.2 `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}
