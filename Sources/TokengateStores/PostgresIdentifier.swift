//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A table or column name from the configuration, checked and quoted before it is put into SQL.
///
/// Names cannot be bound as query parameters, so they are the one place where configuration text becomes SQL
/// text. Only `name` or `schema.name` made of ASCII letters, digits and `_` (not starting with a digit) is
/// accepted, each part at most 63 bytes (PostgreSQL cuts longer names silently, which could make two names one),
/// and the result is always double-quoted. Quoting makes the name case-sensitive: `Users` means the table created
/// as `"Users"`, not `users`; write names as they appear in `\d`.
struct PostgresIdentifier: Sendable, Hashable, CustomStringConvertible {
    /// PostgreSQL's NAMEDATALEN - 1.
    static let maxPartLength = 63

    /// The schema, when the name was qualified.
    let schema: String?
    /// The table, column or channel name.
    let name: String

    /// Validates `text` as `name` or, when `allowSchema`, `schema.name`.
    ///
    /// - Parameter what: Names the setting in the error ("the RP table"); the message repeats the rejected text
    ///   only when it is short and printable, as configuration is not secret but may be garbage.
    init(_ text: String, what: String, allowSchema: Bool = true) throws {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 1 || (allowSchema && parts.count == 2),
            parts.allSatisfy(Self.isPlainIdentifier)
        else {
            let shown = Self.printable(text).map { " (\"\($0)\")" } ?? ""
            let form = allowSchema ? "name or schema.name" : "name"
            throw CutoffStoreError(
                code: .invalidStoreConfiguration,
                message: "\(what)\(shown) must be a plain SQL \(form): ASCII letters, digits and _, not starting "
                    + "with a digit, at most \(Self.maxPartLength) characters per part"
            )
        }
        self.schema = parts.count == 2 ? String(parts[0]) : nil
        self.name = String(parts[parts.count - 1])
    }

    private init(schema: String?, name: String) {
        self.schema = schema
        self.name = name
    }

    /// `"schema"."name"` or `"name"`: safe to put into SQL text, because validation allowed no `"` at all.
    var quoted: String {
        if let schema = self.schema {
            return "\"\(schema)\".\"\(self.name)\""
        }
        return "\"\(self.name)\""
    }

    /// The name as configured (`schema.name`), for messages.
    var description: String {
        if let schema = self.schema {
            return "\(schema).\(self.name)"
        }
        return self.name
    }

    /// A name derived from this one (`tokengate_cutoffs` → `tokengate_cutoffs_global`) in the same schema.
    func suffixed(_ suffix: String, what: String) throws -> PostgresIdentifier {
        let derived = PostgresIdentifier(schema: self.schema, name: self.name + suffix)
        guard Self.isPlainIdentifier(Substring(derived.name)) else {
            throw CutoffStoreError(
                code: .invalidStoreConfiguration,
                message: "\(what) \"\(derived.name)\" derived from \"\(self.name)\" is longer than "
                    + "\(Self.maxPartLength) characters; choose a shorter table name"
            )
        }
        return derived
    }

    /// `^[A-Za-z_][A-Za-z0-9_]*$`, at most ``maxPartLength`` bytes.
    static func isPlainIdentifier(_ part: Substring) -> Bool {
        let bytes = part.utf8
        guard let first = bytes.first, bytes.count <= Self.maxPartLength, Self.isLetterOrUnderscore(first) else {
            return false
        }
        return bytes.allSatisfy {
            Self.isLetterOrUnderscore($0) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
        }
    }

    private static func isLetterOrUnderscore(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || byte == UInt8(ascii: "_")
    }

    /// `text` if it is short printable ASCII without quotes, for error messages.
    private static func printable(_ text: String) -> String? {
        guard text.utf8.count <= 80,
            text.utf8.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        else {
            return nil
        }
        return text
    }
}
