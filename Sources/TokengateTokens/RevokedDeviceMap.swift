//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import HashTreeCollections

/// The revoked devices, by id, as a persistent hash map (the same structure as ``CutoffUserMap``, for the same
/// reasons: a revocation copies the O(log n) nodes on its way, and the next snapshot shares the rest).
///
/// A lookup hashes the 16-byte id and walks a few nodes: no lock, no allocation. Entries leave once every token
/// of the device is dead anyway (``RevokedDevice/isDead(userCutoffs:globalRevokedBefore:now:clockSkew:)``), so
/// the map holds the devices revoked within the tokens' lifetime, not every device ever revoked.
public struct RevokedDeviceMap: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: DeviceID, value: RevokedDevice)

    private var storage: TreeDictionary<DeviceID, RevokedDevice>

    public init() {
        self.storage = [:]
    }

    public init(dictionaryLiteral elements: (DeviceID, RevokedDevice)...) {
        self.storage = TreeDictionary(uniqueKeysWithValues: elements)
    }

    public subscript(device: DeviceID) -> RevokedDevice? {
        @inline(__always) get { self.storage[device] }
        set { self.storage[device] = newValue }
    }

    public var count: Int { self.storage.count }

    public var isEmpty: Bool { self.storage.isEmpty }

    public func makeIterator() -> Iterator {
        Iterator(base: self.storage.makeIterator())
    }

    public struct Iterator: IteratorProtocol {
        fileprivate var base: TreeDictionary<DeviceID, RevokedDevice>.Iterator

        public mutating func next() -> Element? {
            self.base.next().map { (key: $0.key, value: $0.value) }
        }
    }
}
