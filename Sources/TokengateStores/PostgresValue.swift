//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A statement parameter, sent to libpq in text format with an explicit type.
///
/// Values always travel as parameters (`$1`), never inside the SQL text. The type is given rather than left to the
/// server's inference so a comparison such as `revoked_before < $2` is planned exactly as written.
enum PostgresValue: Sendable, Hashable {
    case text(String)
    case int8(Int64)

    /// `pg_type` OIDs: `text` and `int8`, fixed since PostgreSQL 7.
    var typeOID: UInt32 {
        switch self {
        case .text:
            return 25
        case .int8:
            return 20
        }
    }

    /// The text format of the value, as libpq sends it.
    var textFormat: String {
        switch self {
        case .text(let value):
            return value
        case .int8(let value):
            return String(value)
        }
    }

    /// Whether the value can become a C string: libpq's text parameters end at the first NUL byte, so a value with
    /// one would be cut short silently. User ids never contain one (``CutoffWrite/validate()`` refuses control
    /// characters), but a lookup key comes from a request path.
    var isCString: Bool {
        switch self {
        case .text(let value):
            return !value.utf8.contains(0)
        case .int8:
            return true
        }
    }
}
