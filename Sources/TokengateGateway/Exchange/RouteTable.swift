//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig

/// Finds the route for a request: host-specific routes first, then host-less ones; within each, the longest
/// path prefix wins.
///
/// ### Function
/// The host is compared case-insensitively with its port (and a trailing dot) ignored; IPv6 literals may come
/// bracketed (`[::1]:8443`). The path is compared byte for byte as a prefix, so `/api/` matches `/api/users`
/// but not `/api`, and `/token` matches `/tokens` too: write prefixes with a trailing `/` where that matters.
///
/// The caller passes the path *without* the query, and must already have refused paths that a backend could
/// read differently from these bytes (dot segments, encoded slashes, backslashes), since a prefix match on an
/// un-normalized path is how auth rules get bypassed.
///
/// ### Implementation
/// Routes are kept as UTF-8 byte arrays, grouped by host and sorted by descending prefix length at build
/// time, so a match is a short linear scan with no allocation: a gateway has tens of routes, not thousands,
/// and a scan over contiguous bytes beats hashing a lower-cased copy of the host.
struct RouteTable: Sendable {
    private struct Entry: Sendable {
        var prefix: [UInt8]
        var index: Int
    }

    private struct HostGroup: Sendable {
        /// Lower-case host bytes.
        var host: [UInt8]
        var entries: [Entry]
    }

    private var hostGroups: [HostGroup]
    private var anyHost: [Entry]

    /// The routes in configuration order; matches return indexes into this array.
    init(routes: [RouteConfiguration]) {
        var groups: [HostGroup] = []
        var anyHost: [Entry] = []
        for (index, route) in routes.enumerated() {
            let entry = Entry(prefix: Array(route.pathPrefix.utf8), index: index)
            if let host = route.host {
                let hostBytes = Array(host.lowercased().utf8)
                if let group = groups.firstIndex(where: { $0.host == hostBytes }) {
                    groups[group].entries.append(entry)
                } else {
                    groups.append(HostGroup(host: hostBytes, entries: [entry]))
                }
            } else {
                anyHost.append(entry)
            }
        }
        // Longest prefix first; equal lengths keep file order (the sort is made stable by the index).
        let order = { (a: Entry, b: Entry) in
            a.prefix.count != b.prefix.count ? a.prefix.count > b.prefix.count : a.index < b.index
        }
        for group in groups.indices {
            groups[group].entries.sort(by: order)
        }
        anyHost.sort(by: order)
        self.hostGroups = groups
        self.anyHost = anyHost
    }

    /// The index of the matching route, or `nil` when none matches.
    ///
    /// - Parameters:
    ///   - host: The request's host (`Host` header or `:authority`), with or without port; `nil` if absent.
    ///   - path: The request path without the query string.
    func match(host: String?, path: String) -> Int? {
        var path = path
        return path.withUTF8 { pathBytes in
            guard var host else {
                return self.match(hostBytes: nil, pathBytes: pathBytes)
            }
            return host.withUTF8 { hostBytes in
                self.match(hostBytes: hostBytes, pathBytes: pathBytes)
            }
        }
    }

    /// The same, on raw bytes (for example straight from a request head buffer).
    func match(hostBytes: UnsafeBufferPointer<UInt8>?, pathBytes: UnsafeBufferPointer<UInt8>) -> Int? {
        if let hostBytes, !self.hostGroups.isEmpty {
            let bare = Self.stripPort(hostBytes)
            for group in self.hostGroups where Self.equalsLowercased(bare, group.host) {
                if let index = Self.longestPrefix(group.entries, pathBytes) {
                    return index
                }
                break
            }
        }
        return Self.longestPrefix(self.anyHost, pathBytes)
    }

    private static func longestPrefix(_ entries: [Entry], _ path: UnsafeBufferPointer<UInt8>) -> Int? {
        for entry in entries where entry.prefix.count <= path.count {
            var matches = true
            for offset in 0..<entry.prefix.count where entry.prefix[offset] != path[offset] {
                matches = false
                break
            }
            if matches {
                return entry.index
            }
        }
        return nil
    }

    /// `example.com:8443` → `example.com`, `[::1]:8443` → `::1`, `example.com.` → `example.com`.
    private static func stripPort(_ host: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var start = 0
        var end = host.count
        if host.first == UInt8(ascii: "[") {
            start = 1
            end = host.firstIndex(of: UInt8(ascii: "]")) ?? host.count
        } else if let colon = host.firstIndex(of: UInt8(ascii: ":")) {
            end = colon
        }
        if end > start, host[end - 1] == UInt8(ascii: ".") {
            end -= 1
        }
        return UnsafeBufferPointer(rebasing: host[start..<end])
    }

    private static func equalsLowercased(_ candidate: UnsafeBufferPointer<UInt8>, _ lowercased: [UInt8]) -> Bool {
        guard candidate.count == lowercased.count else {
            return false
        }
        for offset in 0..<candidate.count {
            var byte = candidate[offset]
            if byte >= 0x41, byte <= 0x5A {
                byte |= 0x20
            }
            if byte != lowercased[offset] {
                return false
            }
        }
        return true
    }
}
