//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A fixed set of field names (lowercase ASCII literals), looked up in a field's raw bytes ignoring ASCII case.
///
/// Every forwarded field of every request and response is looked up in a few of these (hop-by-hop, forwarding,
/// sensitive names), so the look-up rules most names out by their length alone: one bit per length present,
/// then only the names of that length are compared. A `[StaticString]` walked whole compared every field with
/// every name's length, and each access to a table kept in a `static let` array paid for the array's retain.
package struct FieldNameSet: Sendable {
    /// Bit `n` set: some name has `n` bytes. Names are shorter than 64 bytes (checked when the set is made).
    private let lengths: UInt64
    /// The names by their length (index `n`: the names of `n` bytes).
    private let byLength: [[StaticString]]

    package init(_ names: [StaticString]) {
        var lengths: UInt64 = 0
        var byLength = Array(repeating: [StaticString](), count: 64)
        for name in names {
            let count = name.utf8CodeUnitCount
            precondition(count > 0 && count < 64, "field names in a FieldNameSet are 1 to 63 bytes")
            precondition(
                UnsafeBufferPointer(start: name.utf8Start, count: count).allSatisfy { FieldBytes.lower($0) == $0 },
                "field names in a FieldNameSet are lowercase"
            )
            lengths |= 1 << UInt64(count)
            byLength[count].append(name)
        }
        self.lengths = lengths
        self.byLength = byLength
    }

    /// Whether `name` is one of the set's names, ignoring ASCII case.
    @inline(__always)
    package func contains(_ name: UnsafeRawBufferPointer) -> Bool {
        let count = name.count
        guard count < 64, self.lengths & (1 << UInt64(count)) != 0 else { return false }
        return FieldBytes.isOne(of: self.byLength[count], name)
    }
}
