//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A file path from the configuration, resolved against the configuration file's directory.
///
/// Both forms are kept: ``path`` is what the gateway opens, ``original`` is what the operator wrote and what
/// messages should show first (a resolved absolute path alone is hard to match against the file).
/// `..` components are kept as written rather than collapsed, because collapsing them lexically can name a
/// different file than the kernel would when a component is a symbolic link.
public struct ConfigPath: Sendable, Hashable, CustomStringConvertible {
    /// The path to open: absolute when the configuration was loaded from a file.
    public var path: String
    /// The path as written in the configuration.
    public var original: String

    public init(path: String, original: String) {
        self.path = path
        self.original = original
    }

    /// Resolves `original` against `directory` (which may be empty for the current directory).
    public init(resolving original: String, against directory: String) {
        self.original = original
        if original.hasPrefix("/") || directory.isEmpty {
            self.path = original
        } else {
            var relative = Substring(original)
            while relative.hasPrefix("./") {
                relative = relative.dropFirst(2).drop(while: { $0 == "/" })
            }
            self.path = directory.hasSuffix("/") ? directory + relative : directory + "/" + relative
        }
    }

    public var description: String {
        self.path == self.original ? self.original : "\(self.original) (\(self.path))"
    }
}
