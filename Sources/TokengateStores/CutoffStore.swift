//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

/// A source of truth for cutoffs: the SQLite file (``SQLiteCutoffStore``), a read-only JSON file
/// (``JSONFileCutoffStore``) and PostgreSQL (``PostgresCutoffStore``).
///
/// Stores are control-plane objects: every call may block on I/O and is `async`. The request path never
/// calls a store; it reads the ``CutoffSnapshot`` that ``CutoffSyncService`` builds from ``load()``.
public protocol CutoffStore: Sendable {
    /// A short description for logs ("sqlite /var/lib/tokengate/cutoffs.db"); never a password.
    var storeDescription: String { get }

    /// Reads every cutoff in one consistent read.
    func load() async throws -> CutoffTable

    /// Reads every cutoff in one consistent read and lays each row over `base` as it arrives, the later of each
    /// cutoff winning (``CutoffTable/mergedForward(onto:)``); `nil` gives the table as stored.
    ///
    /// The sync service's full reload: merged row by row into the persistent map, a reload that finds what is
    /// already enforced allocates nothing but the rows in flight, where building a second table first doubled the
    /// gateway's memory for as long as the reload took. The default loads a table and merges it.
    func load(onto base: CutoffTable?) async throws -> CutoffTable

    /// The users changed after `position` (at most `limit` of them, oldest change first) and the global row now,
    /// in one consistent read; `nil` when the store has no change feed (the JSON file; an RP table without a
    /// sequence column), and the sync service then reloads whole tables. The default returns `nil`.
    ///
    /// A position of another feed (``CutoffFeedPosition/feed``) may be answered from the store's own feed: the
    /// caller compares the feeds before it trusts the rows.
    func changes(since position: CutoffFeedPosition, limit: Int) async throws -> CutoffChanges?

    /// A cheap marker that changes when the store's content may have changed since the marker was taken
    /// (SQLite's `data_version`, a file's inode/size/mtime). The sync service polls it and reloads only when
    /// it differs; `nil` means "cannot tell", and the service then reloads on every poll.
    func changeMarker() async throws -> String?

    /// The stored cutoffs of one user and the global cutoff, read from the store itself.
    func lookup(user: String) async throws -> CutoffLookup

    /// Applies one write and returns only after it is durable (committed and synced).
    func apply(_ write: CutoffWrite) async throws -> CutoffWriteResult

    /// Releases the store's resources. Later calls fail with ``CutoffStoreError/Code/storeUnavailable``.
    func close() async throws

    /// Pushed hints that the store's content changed (PostgreSQL's LISTEN/NOTIFY), so that
    /// ``CutoffSyncService/run()`` resyncs at once instead of at its next poll; `nil` for stores that can only be
    /// polled. The default implementation returns `nil`.
    ///
    /// The stream has one consumer (the store's one sync service) and may coalesce signals: a consumer must treat
    /// every signal as "something may have changed; resync", never as the complete list of changes. Polling stays
    /// on as the safety net for a lost signal.
    var changeSignals: AsyncStream<CutoffChangeSignal>? { get }

    // MARK: Devices

    /// Whether the store keeps device records (SQLite, PostgreSQL in either mode, in tokengate's own tables). The
    /// JSON file keeps none: its token page then mints tokens without a device, as before devices existed.
    var keepsDevices: Bool { get }

    /// Records a device the token page is about to hand its first token to; durable before it returns.
    func recordDevice(_ record: DeviceRecord) async throws

    /// The user's devices, revoked ones included, newest first (at most ``maximumDevicesListed``).
    func devices(user: String) async throws -> [DeviceRecord]

    /// Marks the user's device revoked at `at`; durable before it returns. Revoking a revoked device changes
    /// nothing (`changed: false`, the first time kept). Throws ``CutoffStoreError/Code/unknownDevice`` when the
    /// user has no such device.
    func revokeDevice(user: String, device: DeviceID, at: Int64) async throws -> DeviceRevocation

    /// Rotates a device's refresh token (``RefreshTokenKey``) if `rotation` names its current generation; revokes
    /// the device when it names an earlier one (reuse). Durable before it returns.
    func rotateRefresh(_ rotation: RefreshRotation) async throws -> RefreshOutcome
}

/// The most devices of one user a listing returns: an account with more is an attack or a bug, and the admin API's
/// answer stays bounded.
public let maximumDevicesListed = 1000

/// What ``CutoffStore/revokeDevice(user:device:at:)`` did.
public struct DeviceRevocation: Sendable, Hashable {
    /// The device as stored now (``DeviceRecord/revokedAt`` set).
    public var record: DeviceRecord
    /// Whether this call revoked it (false: it was revoked already).
    public var changed: Bool

    public init(record: DeviceRecord, changed: Bool) {
        self.record = record
        self.changed = changed
    }
}

extension CutoffStore {
    public var changeSignals: AsyncStream<CutoffChangeSignal>? {
        nil
    }

    public var keepsDevices: Bool { false }

    public func recordDevice(_ record: DeviceRecord) async throws {
        throw CutoffStoreError.noDevices(self.storeDescription)
    }

    public func devices(user: String) async throws -> [DeviceRecord] {
        throw CutoffStoreError.noDevices(self.storeDescription)
    }

    public func revokeDevice(user: String, device: DeviceID, at: Int64) async throws -> DeviceRevocation {
        throw CutoffStoreError.noDevices(self.storeDescription)
    }

    public func rotateRefresh(_ rotation: RefreshRotation) async throws -> RefreshOutcome {
        throw CutoffStoreError.noDevices(self.storeDescription)
    }

    public func load(onto base: CutoffTable?) async throws -> CutoffTable {
        let loaded = try await self.load()
        return base.map { loaded.mergedForward(onto: $0) } ?? loaded
    }

    public func changes(since position: CutoffFeedPosition, limit: Int) async throws -> CutoffChanges? {
        nil
    }
}

/// A hint from a store that its content changed.
public struct CutoffChangeSignal: Sendable, Hashable {
    /// The user whose cutoffs changed, or `nil` when anything may have changed (the global cutoff, a forced
    /// write, a reconnect after which notifications may have been missed).
    public var user: String?

    public init(user: String?) {
        self.user = user
    }
}

/// One user's cutoffs together with the global cutoff, as an admin sees them.
public struct CutoffLookup: Sendable, Hashable {
    public var user: UserCutoffs
    public var globalRevokedBefore: Int64?

    public init(user: UserCutoffs, globalRevokedBefore: Int64?) {
        self.user = user
        self.globalRevokedBefore = globalRevokedBefore
    }
}

// MARK: The named writes, for the `tokengate revoke` CLI (which writes through the store without a gateway).

extension CutoffStore {
    /// Sets the user's `revoked_before` to `at` (a password change). See ``CutoffWrite``.
    @discardableResult
    public func passwordChanged(user: String, at: Int64, force: Bool = false) async throws -> CutoffWriteResult {
        try await self.apply(.passwordChanged(user: user, at: at, force: force))
    }

    /// Sets the user's `api_revoked_before` to `at` ("disable mobile apps"). See ``CutoffWrite``.
    @discardableResult
    public func disableMobileApps(user: String, at: Int64, force: Bool = false) async throws -> CutoffWriteResult {
        try await self.apply(.disableMobileApps(user: user, at: at, force: force))
    }

    /// Sets the global cutoff to `at`. See ``CutoffWrite``.
    @discardableResult
    public func revokeAll(at: Int64, force: Bool = false) async throws -> CutoffWriteResult {
        try await self.apply(.revokeAll(at: at, force: force))
    }

    /// The stored cutoffs of `user` and the global cutoff.
    public func cutoffs(for user: String) async throws -> CutoffLookup {
        try CutoffUserID.validate(user)
        return try await self.lookup(user: user)
    }
}
