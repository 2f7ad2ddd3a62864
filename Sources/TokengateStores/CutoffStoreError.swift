//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// An error from a cutoff store, the sync service or the admin API logic.
///
/// A struct with a stable ``Code`` rather than a public enum, so that new failure kinds (PostgreSQL, the
/// RP-table mode) can be added without breaking callers that switch over the codes they know.
/// Messages never contain a token or a secret; they may name a file path or a time, and say which
/// field was wrong, because an operator has to be able to fix the cause from the message alone.
public struct CutoffStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure: stable, comparable, and what callers branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidUserID = "invalid_user_id"
            case invalidTime = "invalid_time"
            case cutoffWouldMoveBackward = "cutoff_would_move_backward"
            case readOnlyStore = "read_only_store"
            case storeUnavailable = "store_unavailable"
            case invalidStoreFile = "invalid_store_file"
            case unsupportedSchema = "unsupported_schema"
            case invalidStoreConfiguration = "invalid_store_configuration"
            case noDevices = "no_device_store"
            case unknownDevice = "unknown_device"
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// A user id that is empty, longer than 256 bytes of UTF-8, or contains control characters.
        public static let invalidUserID = Code(.invalidUserID)
        /// A cutoff time that is negative, too far in the future, or not a UNIX time / RFC 3339 string.
        public static let invalidTime = Code(.invalidTime)
        /// A write without `force` that would move a cutoff to an earlier time; ``CutoffStoreError/keptCutoff``
        /// holds the value that was kept.
        public static let cutoffWouldMoveBackward = Code(.cutoffWouldMoveBackward)
        /// A write to a store that cannot be written (the JSON file store), or a user's cutoff in PostgreSQL's
        /// RP-table mode (the RP's own table holds it).
        public static let readOnlyStore = Code(.readOnlyStore)
        /// The store could not be read or written (file missing, not a database, I/O error, busy).
        public static let storeUnavailable = Code(.storeUnavailable)
        /// The store's file exists but its content is wrong (JSON file store).
        public static let invalidStoreFile = Code(.invalidStoreFile)
        /// The database was written by a newer tokengate with a schema this one does not know.
        public static let unsupportedSchema = Code(.unsupportedSchema)
        /// The store's settings cannot work: a table or column name that is not a plain SQL identifier, an
        /// RP table or column that does not exist, a column type the store cannot read as a time, or a database
        /// role that may not create or use tokengate's own table.
        public static let invalidStoreConfiguration = Code(.invalidStoreConfiguration)
        /// The store keeps no devices (the JSON file): nothing to list or revoke.
        public static let noDevices = Code(.noDevices)
        /// The user has no device of that id.
        public static let unknownDevice = Code(.unknownDevice)

        /// The stable snake_case name, also used as the admin API's `error` field.
        public var description: String {
            self.base.rawValue
        }
    }

    /// Holds the message so the error stays one pointer wide however long the message is.
    private final class Backing: Sendable {
        let message: String
        let keptCutoff: Int64?

        init(message: String, keptCutoff: Int64?) {
            self.message = message
            self.keptCutoff = keptCutoff
        }
    }

    /// What went wrong, as a stable code.
    public let code: Code
    private let backing: Backing

    /// A human-readable explanation for logs and the admin API's `error_description`.
    public var message: String {
        self.backing.message
    }

    /// For ``Code/cutoffWouldMoveBackward``: the cutoff that is in force and was kept.
    public var keptCutoff: Int64? {
        self.backing.keptCutoff
    }

    public init(code: Code, message: String, keptCutoff: Int64? = nil) {
        self.code = code
        self.backing = Backing(message: message, keptCutoff: keptCutoff)
    }

    public var description: String {
        "\(self.code): \(self.message)"
    }

    /// The refusal of a store without devices.
    static func noDevices(_ description: String) -> CutoffStoreError {
        CutoffStoreError(
            code: .noDevices,
            message: "\(description) keeps no devices; revoking one device needs the SQLite or PostgreSQL store "
                + "(tokens minted with this store carry no device: revoke them with `disable mobile apps`)"
        )
    }

    /// Errors compare by code only, so tests and callers can match on the kind without the wording.
    public static func == (lhs: CutoffStoreError, rhs: CutoffStoreError) -> Bool {
        lhs.code == rhs.code
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.code)
    }
}
