//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import HashTreeCollections

/// Every user's cutoffs, as a persistent hash map: a copy that changes one user copies the O(log n) nodes on the
/// way to that user and shares every other node with the original.
///
/// ### Why a persistent map
/// The sync service keeps the enforced table next to the snapshot it published, and requests may still hold older
/// snapshots. With a `Dictionary` they shared one buffer until the next write, which then copied all of it: with a
/// million users a revocation copied tens of megabytes while a lookup held the old one, and memory doubled during
/// each reload. swift-collections' `TreeDictionary` (a compressed hash-array mapped prefix tree, 32-way) makes a
/// change cost a handful of node copies, and two versions cost only what differs between them.
///
/// ### Lookups
/// `subscript(_:)` hashes the key once (the process-seeded `Hasher`, so an attacker who picks user ids cannot
/// aim them at one path) and walks at most about log32(n) nodes: 3 levels at 5,000 users, 5 at 10 million. No
/// lock, no allocation, no reference counting beyond the snapshot's own.
///
/// ### Memory
/// One entry is the key (16 bytes: a `String`, whose bytes are inline up to 15 UTF-8 bytes and otherwise in one
/// heap buffer) and the cutoffs (16 bytes, ``UserCutoffs``), stored inline in the tree's nodes; the nodes add
/// their bitmaps, child pointers and unused capacity. See `docs/operations.md`, "Sizing", for figures.
/// Equality (`==`) skips every node the two maps share, so comparing two versions costs what differs between them.
public struct CutoffUserMap: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: CutoffUserKey, value: UserCutoffs)

    private var storage: TreeDictionary<CutoffUserKey, UserCutoffs>

    public init() {
        self.storage = [:]
    }

    public init(dictionaryLiteral elements: (CutoffUserKey, UserCutoffs)...) {
        self.storage = TreeDictionary(uniqueKeysWithValues: elements)
    }

    /// A map of `dictionary`'s entries (for tests, files and benchmarks).
    public init(_ dictionary: [CutoffUserKey: UserCutoffs]) {
        self.storage = TreeDictionary(uniqueKeysWithValues: dictionary.lazy.map { ($0.key, $0.value) })
    }

    /// The user's cutoffs, or `nil`; setting `nil` removes the user. O(log n), see the type's overview.
    public subscript(user: CutoffUserKey) -> UserCutoffs? {
        @inline(__always) get { self.storage[user] }
        set { self.storage[user] = newValue }
    }

    public var count: Int { self.storage.count }

    public var isEmpty: Bool { self.storage.isEmpty }

    public func makeIterator() -> Iterator {
        Iterator(base: self.storage.makeIterator())
    }

    /// Visits the entries in an unspecified order (the tree's).
    public struct Iterator: IteratorProtocol {
        fileprivate var base: TreeDictionary<CutoffUserKey, UserCutoffs>.Iterator

        public mutating func next() -> Element? {
            self.base.next().map { (key: $0.key, value: $0.value) }
        }
    }

    /// The user ids, in an unspecified order.
    public var keys: some Sequence<CutoffUserKey> { self.storage.keys }

    /// The entries as a standard dictionary (for tests and the JSON writer; O(n) copies).
    public var dictionary: [CutoffUserKey: UserCutoffs] {
        var dictionary: [CutoffUserKey: UserCutoffs] = [:]
        dictionary.reserveCapacity(self.count)
        for (key, value) in self.storage {
            dictionary[key] = value
        }
        return dictionary
    }
}
