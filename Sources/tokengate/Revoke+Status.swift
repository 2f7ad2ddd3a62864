//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateStores

extension Revoke {
    /// The exit statuses of `tokengate revoke`, the values of sysexits.h, so that a script can tell a failure
    /// worth retrying (75) from one an operator must fix. Listed in `tokengate revoke --help` and
    /// docs/operations.md; the other subcommands keep 2 for every failure.
    enum Status: Int32 {
        /// `EX_USAGE`: the command line is wrong (an option missing or unknown, `--user` with `--all`, an invalid
        /// user id, `--at` unreadable or more than 5 minutes ahead).
        case usage = 64
        /// `EX_DATAERR`: the store keeps a later cutoff and cutoffs only move forward without `--force`.
        case cutoffWouldMoveBackward = 65
        /// `EX_UNAVAILABLE`: the store cannot be used as it is: the SQLite file is missing (revoke never creates
        /// it), is a directory or not a database, or was written by a newer tokengate.
        case storeNotUsable = 69
        /// `EX_TEMPFAIL`: the store did not answer (database down or unreachable, locked or busy, timed out);
        /// nothing was written, and the same command may succeed later.
        case temporary = 75
        /// `EX_CONFIG`: the configuration cannot be used: unreadable or invalid, a read-only store (the JSON file;
        /// PostgreSQL's `rp_table` mode for a user's cutoff), a store setting the store refuses (a role that may not
        /// create or use tokengate's table included), a password file that cannot be read.
        case configuration = 78

        /// The status for an error from opening the store or from the write.
        init(for error: any Error) {
            if error is CutoffStoreFactoryError {
                self = .storeNotUsable
                return
            }
            guard let error = error as? CutoffStoreError else {
                // Not known to be permanent: a script may try again, and a revocation is worth it.
                self = .temporary
                return
            }
            switch error.code {
            case .cutoffWouldMoveBackward: self = .cutoffWouldMoveBackward
            case .invalidUserID, .invalidTime: self = .usage
            case .readOnlyStore, .invalidStoreConfiguration: self = .configuration
            case .invalidStoreFile, .unsupportedSchema: self = .storeNotUsable
            default: self = .temporary  // storeUnavailable, and codes added later
            }
        }
    }
}
