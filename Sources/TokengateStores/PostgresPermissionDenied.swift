//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// PostgreSQL's `insufficient_privilege` (SQLSTATE 42501) as the store's configuration error.
///
/// A role without a privilege it needs is a configuration to fix, not a database that is down: `revoke` exits 78
/// naming the `GRANT` instead of 75 ("try again later"), and `serve` and `check-config --connect` say which
/// `GRANT` is missing. Every such refusal reads the same way, `<store>: <who may not do what> (permission denied,
/// SQLSTATE 42501); <what to do>`, built here from those parts. The server's own text is not repeated (see
/// ``PostgresFailure``); the names in the parts are the configured ones and the role's.
enum PostgresPermissionDenied {
    static let sqlState = "42501"

    /// - Parameters:
    ///   - description: the store (``PostgresCutoffStore/storeDescription``).
    ///   - refused: who may not do what, e.g. "the role tg may not create the table cutoffs".
    ///   - remedy: what to grant, or to change.
    static func error(_ description: String, refused: String, remedy: String) -> CutoffStoreError {
        CutoffStoreError(
            code: .invalidStoreConfiguration,
            message: "\(description): \(refused) (permission denied, SQLSTATE \(Self.sqlState)); \(remedy)"
        )
    }

    /// Runs `body`; a refusal for want of a privilege becomes the error `refusal` gives (it may ask the server,
    /// e.g. for the role's name). Every other error passes unchanged.
    static func mapping<T>(_ body: () throws -> T, to refusal: () throws -> CutoffStoreError) throws -> T {
        do {
            return try body()
        } catch let failure as PostgresFailure where failure.sqlState == Self.sqlState {
            throw try refusal()
        }
    }
}
