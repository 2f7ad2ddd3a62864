//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Yams

/// What every node needs to report an error or resolve a path.
struct DecodingContext {
    /// The file as the caller named it, for messages.
    var file: String
    /// The directory relative paths are resolved against (absolute when loaded from a file).
    var baseDirectory: String
    /// Whether files and environment variables the configuration names must exist.
    var checkFiles: Bool
    /// The key paths a `TOKENGATE_…` variable set, with its name: a problem there names the variable, since the
    /// file's line would point at a value that is not the one judged.
    var setByEnvironment: [String: String] = [:]
}

/// A YAML node with its key path, the unit the decoder works on.
///
/// Every accessor either returns a typed value or throws a ``ConfigurationError`` that points at this node's
/// line and column, so no caller ever builds an error without a position.
struct ConfigNode {
    let node: Node
    let path: String
    let context: DecodingContext

    init(node: Node, path: String, context: DecodingContext) {
        self.node = node
        self.path = path
        self.context = context
    }

    // MARK: Errors

    func error(_ code: ConfigurationError.Code, _ message: String) -> ConfigurationError {
        let mark = self.node.mark
        if let variable = self.context.setByEnvironment[self.path] {
            return ConfigurationError(
                code: code,
                file: self.context.file,
                keyPath: self.path,
                message: "\(message) (set by \(variable))"
            )
        }
        return ConfigurationError(
            code: code,
            file: self.context.file,
            line: mark?.line,
            column: mark?.column,
            keyPath: self.path,
            message: message
        )
    }

    func error(_ syntax: ValueSyntaxError) -> ConfigurationError {
        self.error(.invalidValue, syntax.message)
    }

    /// A short rendering of the node for "got …" in messages: at most a few items and 60 characters, with
    /// control characters escaped so a message can never forge a log line.
    var summary: String {
        switch self.node {
        case .scalar(let scalar):
            if self.isNull {
                return "nothing"
            }
            return ConfigNode.clip(scalar.string)
        case .sequence(let sequence):
            let items = sequence.prefix(5).map { item -> String in
                switch item {
                case .scalar(let scalar): ConfigNode.clip(scalar.string)
                case .sequence: "[…]"
                case .mapping: "{…}"
                case .alias: "*alias"
                }
            }
            return "[" + items.joined(separator: ", ") + (sequence.count > 5 ? ", …" : "") + "]"
        case .mapping:
            return "a mapping"
        case .alias:
            return "an alias"
        }
    }

    private static func clip(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars.prefix(60) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                result += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return text.unicodeScalars.count > 60 ? result + "…" : result
    }

    private var kindName: String {
        switch self.node {
        case .scalar: self.isNull ? "nothing" : "a scalar"
        case .sequence: "a list"
        case .mapping: "a mapping"
        case .alias: "an alias"
        }
    }

    // MARK: Scalars

    /// Whether this is a scalar (null included).
    var isScalar: Bool { self.node.scalar != nil }

    /// Whether this is a list.
    var isSequence: Bool { self.node.sequence != nil }

    /// A plain `~`, `null` or empty scalar: YAML's null, which the decoder treats as an absent key.
    var isNull: Bool {
        guard case .scalar(let scalar) = self.node, scalar.style == .plain || scalar.style == .any else {
            return false
        }
        switch scalar.string {
        case "", "~", "null", "Null", "NULL": return true
        default: return false
        }
    }

    /// The scalar's text. Quoted or not, numbers included: the typed accessors below apply their own grammar.
    func scalar(expected: String = "a string") throws(ConfigurationError) -> String {
        guard case .scalar(let scalar) = self.node, !self.isNull else {
            throw self.error(.wrongType, "expected \(expected), got \(self.kindName)")
        }
        return scalar.string
    }

    /// A non-empty string of at most `maximumLength` bytes without control characters.
    func string(maximumLength: Int = 1024) throws(ConfigurationError) -> String {
        let text = try self.scalar()
        guard !text.isEmpty else {
            throw self.error(.invalidValue, "must not be empty")
        }
        guard text.utf8.count <= maximumLength else {
            throw self.error(.tooLarge, "longer than \(maximumLength) bytes")
        }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw self.error(.invalidValue, "must not contain control characters")
        }
        return text
    }

    func bool() throws(ConfigurationError) -> Bool {
        let text = try self.scalar(expected: "true or false")
        switch text {
        case "true": return true
        case "false": return false
        default: throw self.error(.wrongType, "expected true or false, got \(self.summary)")
        }
    }

    func int(in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        let text = try self.scalar(expected: "a number")
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
            let value = Int(text)
        else {
            throw self.error(.wrongType, "expected a whole number, got \(self.summary)")
        }
        guard range.contains(value) else {
            throw self.error(.invalidValue, "must be from \(range.lowerBound) to \(range.upperBound), got \(value)")
        }
        return value
    }

    func duration(in range: ClosedRange<Duration>) throws(ConfigurationError) -> Duration {
        let text = try self.scalar(expected: "a duration")
        let value: Duration
        do {
            value = try ValueSyntax.duration(text)
        } catch {
            throw self.error(error)
        }
        guard range.contains(value) else {
            throw self.error(
                .invalidValue,
                "must be from \(ValueSyntax.format(range.lowerBound)) to \(ValueSyntax.format(range.upperBound)), "
                    + "got \(text)"
            )
        }
        return value
    }

    func size(in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        let text = try self.scalar(expected: "a size")
        let value: Int
        do {
            value = try ValueSyntax.size(text)
        } catch {
            throw self.error(error)
        }
        guard range.contains(value) else {
            throw self.error(
                .invalidValue,
                "must be from \(range.lowerBound) to \(range.upperBound) bytes, got \(text)"
            )
        }
        return value
    }

    /// One of a closed set of words (`reject`, `redirect`…).
    func choice<T: RawRepresentable & CaseIterable>(_ type: T.Type) throws(ConfigurationError) -> T
    where T.RawValue == String {
        let words = T.allCases.map(\.rawValue)
        let text = try self.scalar(expected: "one of \(words.joined(separator: ", "))")
        guard let value = T(rawValue: text) else {
            var message = "expected one of \(words.joined(separator: ", ")), got \(self.summary)"
            if let suggestion = ValueSyntax.suggestion(for: text, among: words) {
                message += " (did you mean '\(suggestion)'?)"
            }
            throw self.error(.invalidValue, message)
        }
        return value
    }

    /// A file path, resolved against the configuration's directory; checked to be an existing readable regular
    /// file when `mustExist` and the load checks files.
    func path(mustExist: Bool) throws(ConfigurationError) -> ConfigPath {
        let text = try self.string(maximumLength: 4096)
        guard !text.contains("\0") else {
            throw self.error(.invalidValue, "paths cannot contain NUL")
        }
        let path = ConfigPath(resolving: text, against: self.context.baseDirectory)
        if mustExist, self.context.checkFiles {
            switch FileCheck.regularFile(path.path) {
            case .ok:
                break
            case .missing:
                throw self.error(.fileNotFound, "file \(path) does not exist")
            case .notRegular:
                throw self.error(.fileNotFound, "\(path) is not a regular file")
            case .unreadable:
                throw self.error(.fileNotFound, "file \(path) is not readable by this process")
            }
        }
        return path
    }

    /// A path whose file may be created later (a database): its directory must exist when files are checked.
    func creatablePath() throws(ConfigurationError) -> ConfigPath {
        let path = try self.path(mustExist: false)
        if self.context.checkFiles {
            let directory = FileCheck.parentDirectory(of: path.path)
            guard FileCheck.isDirectory(directory) else {
                throw self.error(.fileNotFound, "directory \(directory) for \(path.original) does not exist")
            }
        }
        return path
    }

    // MARK: Collections

    /// The items of a list, each with its indexed key path.
    func sequence(maximumCount: Int = 1000) throws(ConfigurationError) -> [ConfigNode] {
        guard case .sequence(let sequence) = self.node else {
            throw self.error(.wrongType, "expected a list, got \(self.kindName)")
        }
        guard sequence.count <= maximumCount else {
            throw self.error(.tooLarge, "at most \(maximumCount) items, got \(sequence.count)")
        }
        return sequence.enumerated().map { index, item in
            ConfigNode(node: item, path: "\(self.path)[\(index)]", context: self.context)
        }
    }

    /// A mapping whose keys must all be among `allowed`; unknown keys are errors with a suggestion.
    func mapping(allowed: [String]) throws(ConfigurationError) -> ConfigMapping {
        let mapping = try self.anyMapping()
        if let first = mapping.unknownKeys(allowed: allowed).first {
            throw first
        }
        return mapping
    }

    /// A mapping with free-form keys (such as upstream names), which must be plain strings.
    func anyMapping() throws(ConfigurationError) -> ConfigMapping {
        guard case .mapping(let mapping) = self.node else {
            throw self.error(.wrongType, "expected a mapping, got \(self.kindName)")
        }
        var entries: [ConfigMapping.Entry] = []
        entries.reserveCapacity(mapping.count)
        for (key, value) in mapping {
            guard case .scalar(let scalar) = key, !scalar.string.isEmpty else {
                let node = ConfigNode(node: key, path: self.path, context: self.context)
                throw node.error(.unsupportedYAML, "mapping keys must be plain strings")
            }
            let childPath = self.path.isEmpty ? scalar.string : "\(self.path).\(scalar.string)"
            entries.append(
                ConfigMapping.Entry(
                    key: scalar.string,
                    keyNode: ConfigNode(node: key, path: childPath, context: self.context),
                    value: ConfigNode(node: value, path: childPath, context: self.context)
                )
            )
        }
        return ConfigMapping(node: self, entries: entries)
    }
}

/// The entries of a YAML mapping, looked up by key.
struct ConfigMapping {
    struct Entry {
        var key: String
        var keyNode: ConfigNode
        var value: ConfigNode
    }

    let node: ConfigNode
    let entries: [Entry]

    /// The value of `key`, or `nil` when absent or null.
    subscript(key: String) -> ConfigNode? {
        guard let entry = self.entries.first(where: { $0.key == key }), !entry.value.isNull else {
            return nil
        }
        return entry.value
    }

    /// Which of `keys` are present with a non-null value, in file order (so "the second one" is the later one).
    func present(among keys: [String]) -> [String] {
        self.entries.filter { keys.contains($0.key) && !$0.value.isNull }.map(\.key)
    }

    /// Whether `key` is present with a non-null value.
    func has(_ key: String) -> Bool {
        self[key] != nil
    }

    /// One error per key that is not among `allowed`, in the file's order, each with a suggestion for a likely
    /// typo: ``ConfigNode/mapping(allowed:)`` throws the first, the top level reports them all.
    func unknownKeys(allowed: [String]) -> [ConfigurationError] {
        self.entries.filter { !allowed.contains($0.key) }.map { entry in
            var message = "unknown key"
            if entry.key == "<<" {
                message += " (YAML merge keys are not supported)"
            } else if let suggestion = ValueSyntax.suggestion(for: entry.key, among: allowed) {
                message += ", did you mean '\(suggestion)'?"
            } else {
                message += "; expected one of: \(allowed.joined(separator: ", "))"
            }
            return entry.keyNode.error(.unknownKey, message)
        }
    }

    /// The value of a required key; a missing key is reported at the mapping itself.
    func required(_ key: String) throws(ConfigurationError) -> ConfigNode {
        guard let value = self[key] else {
            throw self.node.error(.missingKey, "missing required key '\(key)'")
        }
        return value
    }

    /// The key node of `key`, for errors about the key itself (it must be present).
    func keyNode(_ key: String) -> ConfigNode {
        self.entries.first(where: { $0.key == key })?.keyNode ?? self.node
    }
}
