//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A JSON value for what a minted session holds besides the three configured fields (Django's
/// `_auth_user_backend` and `_auth_user_hash`, Devise's salt, …). Minting only: never on the verify path.
public indirect enum SessionJSONValue: Sendable, Hashable {
    case string(String)
    case integer(Int64)
    case bool(Bool)
    case null
    case array([SessionJSONValue])
    /// Members in the order given (kept, so a minted cookie's bytes are reproducible).
    case object([(String, SessionJSONValue)])

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.json == rhs.json }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.json) }

    /// Compact JSON (no white space), UTF-8, with `<`, `>`, `&` and U+2028/2029 escaped as Rails'
    /// `ActiveSupport::JSON` writes them (harmless to every other reader).
    public var json: [UInt8] {
        var out: [UInt8] = []
        self.write(into: &out)
        return out
    }

    func write(into out: inout [UInt8]) {
        switch self {
        case .string(let text): Self.writeString(text, into: &out)
        case .integer(let value): out += Array(String(value).utf8)
        case .bool(let value): out += Array((value ? "true" : "false").utf8)
        case .null: out += Array("null".utf8)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (index, (name, value)) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(name, into: &out)
                out.append(UInt8(ascii: ":"))
                value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    static func writeString(_ text: String, into out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(UInt8(ascii: "\""))
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case "\\": out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case "\n": out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case "\r": out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case "\t": out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            default:
                let value = scalar.value
                if value < 0x20 || value == 0x3C || value == 0x3E || value == 0x26 || value == 0x2028
                    || value == 0x2029
                {
                    out += [UInt8(ascii: "\\"), UInt8(ascii: "u")]
                    for shift in [12, 8, 4, 0] { out.append(hex[Int(value >> UInt32(shift) & 15)]) }
                } else {
                    out += Array(String(scalar).utf8)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// This value with `value` placed at `steps` (containers made as needed: an object for a name, an array for
    /// an index when the container does not exist yet). Nil when a step meets a scalar, or an index is past the
    /// end of an existing array by more than one.
    func setting(_ value: SessionJSONValue, at steps: ArraySlice<SessionJSONPointer.Step>) -> SessionJSONValue? {
        guard let step = steps.first else { return value }
        let rest = steps.dropFirst()
        switch self {
        case .object(var members):
            let name = String(decoding: step.name, as: UTF8.self)
            if let position = members.firstIndex(where: { $0.0 == name }) {
                guard let child = members[position].1.setting(value, at: rest) else { return nil }
                members[position].1 = child
            } else {
                guard let child = Self.empty(for: rest.first).setting(value, at: rest) else { return nil }
                members.append((name, child))
            }
            return .object(members)
        case .array(var items):
            guard let index = step.index, index <= items.count else { return nil }
            if index == items.count {
                guard let child = Self.empty(for: rest.first).setting(value, at: rest) else { return nil }
                items.append(child)
            } else {
                guard let child = items[index].setting(value, at: rest) else { return nil }
                items[index] = child
            }
            return .array(items)
        case .string, .integer, .bool, .null:
            return nil
        }
    }

    private static func empty(for step: SessionJSONPointer.Step?) -> SessionJSONValue {
        step?.index != nil ? .array([]) : .object([])
    }
}
