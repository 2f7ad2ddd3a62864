//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Every problem found in one configuration file, in the file's order of sections: what `check-config` prints, one
/// line each, so that a file with three mistakes takes one edit instead of three runs.
public struct ConfigurationProblems: Error, CustomStringConvertible, Sendable, Hashable {
    /// Never empty.
    public var errors: [ConfigurationError]

    public init(errors: [ConfigurationError]) {
        precondition(!errors.isEmpty, "ConfigurationProblems needs at least one error")
        self.errors = errors
    }

    /// One ``ConfigurationError`` description per line.
    public var description: String {
        self.errors.map(\.description).joined(separator: "\n")
    }
}
