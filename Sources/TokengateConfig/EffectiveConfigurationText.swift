//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The configuration as the gateway will run it, as YAML-style text for `check-config --print`: every default
/// filled in, the `TOKENGATE_…` overrides applied, every path resolved.
///
/// Written from the typed values by reflection, so that a setting added later is printed without a change here
/// (its name is its property's, in snake case, close to but not always the file's key). A configuration holds no
/// secret itself — secrets are files it names, never read here — but a URL's user information and any string
/// stored under a name that speaks of a secret or a password are elided anyway: the text is made to be pasted
/// into a ticket.
public enum EffectiveConfigurationText {
    public static let elided = "<elided>"

    public static func render(_ configuration: GatewayConfiguration) -> String {
        var lines: [String] = []
        self.renderFields(of: configuration, indent: 0, into: &lines)
        return lines.joined(separator: "\n") + "\n"
    }

    private static func renderFields(of value: Any, indent: Int, into lines: inout [String]) {
        for child in Mirror(reflecting: value).children {
            guard let label = child.label else { continue }
            self.render(key: self.snakeCase(label), value: child.value, indent: indent, into: &lines)
        }
    }

    private static func render(key: String, value: Any, indent: Int, into lines: inout [String]) {
        let pad = String(repeating: " ", count: indent)
        if let leaf = self.leaf(value, key: key) {
            lines.append("\(pad)\(key): \(leaf)")
            return
        }
        let mirror = Mirror(reflecting: value)
        switch mirror.displayStyle {
        case .optional:
            if let wrapped = mirror.children.first?.value {
                self.render(key: key, value: wrapped, indent: indent, into: &lines)
            } else {
                lines.append("\(pad)\(key): ~")
            }
        case .collection, .set:
            let items = Array(mirror.children.map(\.value))
            if items.isEmpty {
                lines.append("\(pad)\(key): []")
                return
            }
            lines.append("\(pad)\(key):")
            for item in items {
                self.renderItem(item, key: key, indent: indent + 2, into: &lines)
            }
        case .dictionary:
            let entries = mirror.children.compactMap { entry -> (String, Any)? in
                let pair = Array(Mirror(reflecting: entry.value).children)
                guard pair.count == 2 else { return nil }
                return ("\(pair[0].value)", pair[1].value)
            }.sorted { $0.0 < $1.0 }
            if entries.isEmpty {
                lines.append("\(pad)\(key): {}")
                return
            }
            lines.append("\(pad)\(key):")
            for (name, entry) in entries {
                self.render(key: self.quoted(name), value: entry, indent: indent + 2, into: &lines)
            }
        case .enum:
            // A case with a payload: `case: payload`.
            guard let payload = mirror.children.first, let label = payload.label else {
                lines.append("\(pad)\(key): \(self.snakeCase("\(value)"))")
                return
            }
            lines.append("\(pad)\(key):")
            self.render(key: self.snakeCase(label), value: payload.value, indent: indent + 2, into: &lines)
        default:
            if mirror.children.isEmpty {
                lines.append("\(pad)\(key): {}")
                return
            }
            lines.append("\(pad)\(key):")
            self.renderFields(of: value, indent: indent + 2, into: &lines)
        }
    }

    private static func renderItem(_ item: Any, key: String, indent: Int, into lines: inout [String]) {
        let pad = String(repeating: " ", count: indent)
        if let leaf = self.leaf(item, key: key) {
            lines.append("\(pad)- \(leaf)")
            return
        }
        // A mapping item: its first line after "- ", the others aligned under it.
        var nested: [String] = []
        self.render(key: "item", value: item, indent: 0, into: &nested)
        let body = nested.count > 1 && nested[0] == "item:" ? Array(nested.dropFirst()) : nested
        for (index, line) in body.enumerated() {
            let trimmed = line.hasPrefix("  ") && nested[0] == "item:" ? String(line.dropFirst(2)) : line
            lines.append(pad + (index == 0 ? "- " : "  ") + trimmed)
        }
    }

    /// A value written on one line, or `nil` for one with fields or items.
    private static func leaf(_ value: Any, key: String) -> String? {
        switch Mirror(reflecting: value).displayStyle {
        case .optional, .collection, .set, .dictionary, .tuple: return nil
        default: break
        }
        if let raw = value as? any RawRepresentable {
            return self.quoted("\(raw.rawValue)")
        }
        switch value {
        case let text as String:
            return self.isSecretName(key) ? self.elided : self.quoted(self.withoutUserInfo(text))
        case let flag as Bool:
            return flag ? "true" : "false"
        case let number as Int:
            return "\(number)"
        case let duration as Duration:
            return ValueSyntax.format(duration)
        case let path as ConfigPath:
            return self.quoted(path.path)
        case let range as ClosedRange<Int>:
            // Statuses are ranges inside (`expected_status`); print them as the file writes them.
            return range.lowerBound == range.upperBound
                ? "\(range.lowerBound)" : self.quoted("\(range.lowerBound)-\(range.upperBound)")
        case let described as any CustomStringConvertible:
            return self.quoted(self.withoutUserInfo(described.description))
        default:
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .enum, mirror.children.isEmpty {
                return self.snakeCase("\(value)")
            }
            return nil
        }
    }

    private static func isSecretName(_ key: String) -> Bool {
        // Names of files and of database columns are not secrets: `secret_file`, `password_changed_column`.
        let words = key.split(separator: "_")
        guard !words.contains(where: { $0 == "file" || $0 == "column" }) else { return false }
        return words.contains { ["secret", "password", "passphrase"].contains(String($0)) }
    }

    /// `scheme://user:password@host/…` without `user:password@`, in case one ever reaches a configuration value.
    static func withoutUserInfo(_ text: String) -> String {
        let characters = Array(text)
        guard let colon = characters.indices.first(where: { index in
            index + 2 < characters.count && characters[index] == ":" && characters[index + 1] == "/"
                && characters[index + 2] == "/"
        }) else { return text }
        let authorityStart = colon + 3
        let authorityEnd =
            characters[authorityStart...].firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" })
            ?? characters.count
        guard let at = characters[authorityStart..<authorityEnd].lastIndex(of: "@") else { return text }
        return String(characters[..<authorityStart]) + self.elided + String(characters[at...])
    }

    /// `maxURIBytes` → `max_uri_bytes`, `edDSA` → `ed_dsa`.
    private static func snakeCase(_ name: String) -> String {
        let characters = Array(name)
        var result = ""
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0 {
                let previous = characters[index - 1]
                let next = index + 1 < characters.count ? characters[index + 1] : nil
                if previous.isLowercase || previous.isNumber || (previous.isUppercase && next?.isLowercase == true) {
                    result += "_"
                }
            }
            result += character.lowercased()
        }
        return result
    }

    /// A double-quoted YAML string (JSON's escapes, which YAML reads the same), control characters escaped.
    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value)
                    || scalar.value == 0x2028 || scalar.value == 0x2029
                {
                    result += "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count)
                        + String(scalar.value, radix: 16)
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
