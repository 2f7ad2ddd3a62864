//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Existence checks for files the configuration names. Files are never opened or read here: parsing
/// certificates and keys is the gateway's job, and not reading them keeps key material out of this module.
enum FileCheck {
    enum Outcome: Equatable {
        case ok
        case missing
        case notRegular
        case unreadable
    }

    /// Follows symbolic links (Kubernetes mounts secrets through them).
    static func regularFile(_ path: String) -> Outcome {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return .missing
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            return .notRegular
        }
        guard access(path, R_OK) == 0 else {
            return .unreadable
        }
        return .ok
    }

    /// The permission bits of `path` (links followed) when its group or other users may read it, else `nil`
    /// (also when it cannot be looked at: whether it exists is checked elsewhere).
    static func groupOrOtherPermissions(_ path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return nil
        }
        let permissions = UInt32(info.st_mode) & 0o777
        return permissions & 0o044 != 0 ? permissions : nil
    }

    static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else {
            return "."
        }
        let parent = path[..<slash]
        return parent.isEmpty ? "/" : String(parent)
    }
}
