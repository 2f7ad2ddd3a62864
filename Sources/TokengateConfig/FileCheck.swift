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

    /// The permission bits of `path` (links followed) when someone besides the gateway may read it, else `nil`
    /// (also when it cannot be looked at: whether it exists is checked elsewhere).
    ///
    /// Other users reading it always counts. Its group reading it counts only when that group is not one of
    /// the gateway process's own (its effective or a supplementary group): `root:tokengate 0640` under a
    /// service running as group `tokengate`, and a Kubernetes secret volume's `defaultMode: 0440` with the
    /// pod's `fsGroup`, are how a secret is given to a service that does not own the file, not exposures.
    static func permissionsExposingSecret(_ path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return nil
        }
        let permissions = UInt32(info.st_mode) & 0o777
        if permissions & 0o004 != 0 {
            return permissions
        }
        guard permissions & 0o040 != 0 else {
            return nil
        }
        return Self.processGroups().contains(info.st_gid) ? nil : permissions
    }

    /// The process's effective group and its supplementary groups.
    private static func processGroups() -> Set<gid_t> {
        var groups: Set<gid_t> = [getegid()]
        let count = getgroups(0, nil)
        if count > 0 {
            var list = [gid_t](repeating: 0, count: Int(count))
            let filled = getgroups(count, &list)
            if filled > 0 {
                groups.formUnion(list.prefix(Int(filled)))
            }
        }
        return groups
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
