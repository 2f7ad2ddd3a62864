//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOCore
import TokengateGateway
import TokengateStores

/// The exit statuses of every subcommand: 0 for success, 1 for a token `token verify` finds invalid, and the values
/// of sysexits.h for failures, so that a deploy script or a service manager can tell a configuration to fix (78) from
/// a port taken (71) or a store to wait for (75) without reading the message.
///
/// Listed in docs/operations.md ("Exit status"); the systemd unit names the statuses that a restart cannot cure in
/// `RestartPreventExitStatus=`, so a broken configuration does not restart in a loop.
enum ExitStatus: Int32 {
    /// `token verify`: the token is not valid (malformed included: the token is what is judged, not an argument).
    case invalidToken = 1
    /// `EX_USAGE`: the command line is wrong (an option missing, unknown or with a value that cannot be used).
    case usage = 64
    /// `EX_DATAERR`: an input file has the wrong content (a key set, a cutoffs file), or `revoke` was refused because
    /// the store keeps a later cutoff (cutoffs only move forward without `--force`).
    case dataError = 65
    /// `EX_NOINPUT`: an input file named on the command line does not exist or cannot be read.
    case noInput = 66
    /// `EX_UNAVAILABLE`: something tokengate needs cannot be used as it is, and retrying does not help: the SQLite
    /// file is missing (`revoke`), a directory or not a database, its schema is newer than this tokengate, or the
    /// loaded OpenSSL or libnghttp2 is too old.
    case unavailable = 69
    /// `EX_SOFTWARE`: an error tokengate did not expect (a bug); the message says what escaped.
    case software = 70
    /// `EX_OSERR`: the operating system refused a listening socket: the address is in use, not on this host, or
    /// needs a privilege (ports below 1024).
    case osError = 71
    /// `EX_CANTCREAT`: an output file cannot be written (`keygen`, or `dev`'s generated files).
    case cannotCreate = 73
    /// `EX_TEMPFAIL`: the cutoff store did not answer (database down or unreachable, locked or busy, timed out);
    /// the same command may succeed later.
    case temporary = 75
    /// `EX_CONFIG`: the configuration cannot be used: the file is unreadable or invalid, a file it names (a
    /// certificate, a key, the admin secret, the PostgreSQL password file) does not load, a read-only store was
    /// asked to write (the JSON file; PostgreSQL's `rp_table` mode for a user's cutoff), or a store setting is
    /// refused (a role that may not create or use tokengate's table included).
    case configuration = 78

    /// The status for a listener that cannot bind: 71 (`EX_OSERR`) while the address may come free (in use,
    /// often by the previous process still draining: a restart may succeed), 78 when only a configuration or a
    /// deployment change helps (`EADDRNOTAVAIL`: not an address of this host; `EACCES`/`EPERM`: a port below 1024
    /// without the capability), so that a service manager does not restart it for ever.
    init(forBindError error: any Error) {
        let code = (error as? GatewayStartupError)?.errnoCode ?? (error as? IOError)?.errnoCode
        switch code {
        case EADDRNOTAVAIL, EACCES, EPERM: self = .configuration
        default: self = .osError
        }
    }

    /// The status for an error from opening the cutoff store or from using it (`revoke`, and `serve` or `dev`
    /// at start).
    init(forStoreError error: any Error) {
        if error is CutoffStoreFactoryError {
            self = .unavailable
            return
        }
        guard let error = error as? CutoffStoreError else {
            // Not known to be permanent: a script may try again, and a revocation is worth it.
            self = .temporary
            return
        }
        switch error.code {
        case .cutoffWouldMoveBackward: self = .dataError
        case .invalidUserID, .invalidTime: self = .usage
        case .readOnlyStore, .invalidStoreConfiguration: self = .configuration
        case .invalidStoreFile, .unsupportedSchema: self = .unavailable
        default: self = .temporary  // storeUnavailable, and codes added later
        }
    }
}

/// Prints `message` to standard error and exits with `status`: the way every subcommand reports a failure it
/// understands. Each call names its status, so that no failure falls into a catch-all by default.
func fail(_ message: String, status: ExitStatus) -> Never {
    LogLineWriter.standardOutput.flush()
    FileOutput.standardError("tokengate: \(message)\n")
    exit(status.rawValue)
}
