//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The rules for a user id that a cutoff can be stored under.
///
/// The id is the token's user claim (`sub` by default) exactly as the RP mints it, so no normalisation
/// happens here: two ids that differ in case or Unicode form are two users. The limits keep the store and
/// the in-memory snapshot bounded and keep ids printable in logs and admin answers.
public enum CutoffUserID {
    /// The longest id accepted, in bytes of UTF-8.
    public static let maxUTF8Bytes = 256

    /// Throws ``CutoffStoreError/Code/invalidUserID`` unless `id` is non-empty, at most
    /// ``maxUTF8Bytes`` bytes of UTF-8, and free of control characters (C0, DEL and C1).
    ///
    /// The message never repeats the id: it may be attacker-chosen and contain terminal escapes.
    public static func validate(_ id: String) throws {
        if id.isEmpty {
            throw CutoffStoreError(code: .invalidUserID, message: "the user id is empty")
        }
        if id.utf8.count > Self.maxUTF8Bytes {
            throw CutoffStoreError(
                code: .invalidUserID,
                message: "the user id is longer than \(Self.maxUTF8Bytes) bytes of UTF-8"
            )
        }
        for scalar in id.unicodeScalars where Self.isControl(scalar) {
            throw CutoffStoreError(code: .invalidUserID, message: "the user id contains a control character")
        }
    }

    /// Whether `id` passes ``validate(_:)``.
    public static func isValid(_ id: String) -> Bool {
        (try? Self.validate(id)) != nil
    }

    /// C0 controls, DEL and C1 controls: Unicode general category Cc.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value <= 0x9F)
    }
}
