//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A configuration problem, located by file, line, column and key path.
///
/// The description reads like a compiler diagnostic so editors and CI logs can jump to it:
/// `Config/tokengate.yaml:14:7: routes[1].accept: expected [api], [session], [api, session] or none, got [admin]`.
///
/// Messages never contain a secret: values that may hold one (a PostgreSQL URL, the contents of a secret file)
/// are never echoed, and secret files are only checked for existence here, never read.
///
/// This is a struct with a growable ``Code`` rather than a public enum, so new kinds of problems can be added
/// without breaking exhaustive switches in the gateway or the CLI.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable, Hashable {
    /// The stable kind of the problem, for programs (the message is for people).
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case io
            case tooLarge
            case encoding
            case syntax
            case tooComplex
            case empty
            case unsupportedYAML
            case wrongType
            case unknownKey
            case missingKey
            case invalidValue
            case conflict
            case duplicate
            case unknownReference
            case fileNotFound
            case insecure
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The file could not be read.
        public static let io = Code(.io)
        /// The file or a value is larger than tokengate accepts.
        public static let tooLarge = Code(.tooLarge)
        /// The file is not UTF-8.
        public static let encoding = Code(.encoding)
        /// The YAML itself is malformed.
        public static let syntax = Code(.syntax)
        /// Too deeply nested, or too many nodes once aliases are expanded.
        public static let tooComplex = Code(.tooComplex)
        /// The document is empty.
        public static let empty = Code(.empty)
        /// Explicit tags, merge keys, complex keys and other YAML features a configuration has no use for.
        public static let unsupportedYAML = Code(.unsupportedYAML)
        /// A mapping where a list was expected, and the like.
        public static let wrongType = Code(.wrongType)
        /// A key tokengate does not know (often a typo).
        public static let unknownKey = Code(.unknownKey)
        /// A required key is absent.
        public static let missingKey = Code(.missingKey)
        /// A value of the right type that is not acceptable.
        public static let invalidValue = Code(.invalidValue)
        /// Two settings contradict each other.
        public static let conflict = Code(.conflict)
        /// Something that must be unique appears twice.
        public static let duplicate = Code(.duplicate)
        /// A name refers to something that is not defined (an upstream, for example).
        public static let unknownReference = Code(.unknownReference)
        /// A file the configuration names does not exist or is not a readable regular file.
        public static let fileNotFound = Code(.fileNotFound)
        /// A setting that would weaken the gateway's security guarantees.
        public static let insecure = Code(.insecure)

        public var description: String { self.base.rawValue }
    }

    /// The configuration file as given by the caller (not resolved), so the message matches what the user typed.
    public var file: String
    /// One-based line of the offending node, when known.
    public var line: Int?
    /// One-based column (in Unicode scalars, as libyaml counts) of the offending node, when known.
    public var column: Int?
    /// The key path of the offending node, such as `routes[1].accept`; empty for whole-file problems.
    public var keyPath: String
    /// A sentence for people. Never contains a secret.
    public var message: String
    /// The stable kind of the problem.
    public var code: Code

    public init(
        code: Code,
        file: String,
        line: Int? = nil,
        column: Int? = nil,
        keyPath: String = "",
        message: String
    ) {
        self.code = code
        self.file = file
        self.line = line
        self.column = column
        self.keyPath = keyPath
        self.message = message
    }

    public var description: String {
        var text = self.file
        if let line = self.line {
            text += ":\(line)"
            if let column = self.column {
                text += ":\(column)"
            }
        }
        text += ": "
        if !self.keyPath.isEmpty {
            text += self.keyPath + ": "
        }
        text += self.message
        return text
    }
}
