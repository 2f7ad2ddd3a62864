//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
public import Logging
public import TokengateTokens

/// Keeps the gateway's in-memory ``CutoffSnapshot`` current with a ``CutoffStore``: the control plane of the
/// cutoff check.
///
/// ### Overview
/// The request path never waits on a database. It reads a snapshot that this service builds from a
/// ``CutoffTable`` and hands to `publish` (the gateway passes `holder.store(_:)` of its lock-free holder).
/// The service loads the store at ``start()`` (a failure there means "refuse to start"), then ``run()`` follows it:
/// - A store with a change feed (SQLite, PostgreSQL copy mode, an RP table with a sequence column) is asked for
///   the rows changed since the last position (``CutoffStore/changes(since:limit:)``) every
///   ``Configuration/feedPollInterval``, and at once on every ``CutoffStore/changeSignals`` hint (PostgreSQL's
///   LISTEN/NOTIFY). Only those rows are merged, so a revocation costs the same with ten users or ten million.
/// - Any other store (the JSON file, an RP table without one) is polled for its cheap
///   ``CutoffStore/changeMarker()`` every ``Configuration/pollInterval`` and reloaded whole when it changed.
/// - Either way, everything is reloaded every ``Configuration/fullReloadInterval`` as a safety net, and whenever the
///   feed cannot say what changed: its force epoch moved (a cutoff forced back, a row deleted), it was renumbered
///   (another file, a restored backup), or more changes wait than ``Configuration/maxFeedBatches`` reads take.
///
/// ### Rules
/// - **Forward only.** A reload is merged onto the enforced table with ``CutoffTable/mergedForward(onto:)``,
///   so a published snapshot never accepts a token that the previous one rejected, unless the store's force
///   epoch changed (an admin forced a cutoff back), in which case the reload is taken as it is.
/// - **Keep the last snapshot.** When the store fails, nothing is published; the last snapshot stays in force,
///   ``lastError`` records why, and ``isStale(now:)`` turns true once ``lastSyncAt`` is older than
///   ``Configuration/staleAfter`` (the gateway reports not-ready then). The next successful poll resyncs.
/// - **Publish before acknowledging.** The write methods return only after the store committed the write *and*
///   the snapshot containing it was published, so a request sent after the admin's 200 is already checked
///   against the new cutoff.
/// - **One store operation at a time.** Reloads and writes are serialised by an internal FIFO gate, because an
///   actor lets other calls in at every `await`, and a reload that read the store before a write must not be
///   installed after it.
/// - **A cutoff far in the future is enforced, and reported.** Writes refuse one more than
///   ``Configuration/maxFutureSkew`` ahead; one a store holds anyway (a database clock ahead, a JSON file in
///   milliseconds) is enforced as loaded (fail closed), logged, and counted (``futureCutoffCount(now:)``).
/// - **A write the store's configuration refuses is not an outage.** A role without the privilege, a file this
///   process may not write (``CutoffStoreError/Code/invalidStoreConfiguration``): the store still serves reads, so
///   the write is logged once as a configuration problem and neither ``lastError`` nor readiness changes.
///
/// ### Devices
/// A device revoked on its own (``revokeDevice(user:device:at:)``, or by another process into the store) joins the
/// snapshot's ``CutoffSnapshot/revokedDevices`` the way a cutoff does: written, published, then acknowledged; read
/// from the change feed (or a full reload) by every other instance. An entry is dropped at the next full reload once
/// every token of the device is dead anyway: the user's password or api cutoff, or the global one, is later than
/// the revocation, or the clock is past the device's last `exp` by ``Configuration/deviceExpiryMargin``. The store
/// keeps the revoked row (the listing shows it); only the in-memory set forgets it.
///
/// ### Implementation
/// The service keeps the enforced table next to the published snapshot. They share a persistent map
/// (``CutoffUserMap``), so publishing one user's change copies O(log users) nodes and shares the rest with the
/// snapshots requests still hold. A full reload merges the store's rows into that map as they are read
/// (``CutoffStore/load(onto:)``), so it allocates only for what changed; only a reload taken as it is (after the
/// force epoch moved) builds a second map next to the enforced one for its duration.
public actor CutoffSyncService {
    /// Timing and limits of the service.
    public struct Configuration: Sendable {
        /// How often ``run()`` asks a store without a change feed whether anything changed (a marker, then a full
        /// reload when it moved).
        public var pollInterval: Duration
        /// How often ``run()`` reads a change feed (one indexed query that usually returns no row), besides at
        /// every change signal: the bound on how long a write by another process (a `tokengate revoke` against
        /// SQLite) waits to be enforced.
        public var feedPollInterval: Duration
        /// Rows asked of the change feed per read.
        public var feedBatch: Int
        /// Reads of the feed in one sync before it gives up and reloads everything (a bulk import).
        public var maxFeedBatches: Int
        /// How often ``run()`` reloads everything even if the store's marker did not change.
        public var fullReloadInterval: Duration
        /// After this long without a successful sync, ``isStale(now:)`` is true.
        public var staleAfter: Duration
        /// A cutoff further than this in the future is refused: it would reject every token the user gets
        /// until then, including the ones issued after the password change.
        public var maxFutureSkew: Duration
        /// How long past a revoked device's last `exp` its entry is kept: at least the verifier's clock skew (a
        /// token is accepted until `exp` plus the skew), so an entry never leaves while a token of it could pass.
        public var deviceExpiryMargin: Duration

        public init(
            pollInterval: Duration = .seconds(1),
            fullReloadInterval: Duration = .seconds(300),
            staleAfter: Duration = .seconds(30),
            maxFutureSkew: Duration = .seconds(300),
            feedPollInterval: Duration = .milliseconds(250),
            feedBatch: Int = 10_000,
            maxFeedBatches: Int = 20,
            deviceExpiryMargin: Duration = .seconds(3600)
        ) {
            self.deviceExpiryMargin = deviceExpiryMargin
            self.pollInterval = pollInterval
            self.feedPollInterval = feedPollInterval
            self.feedBatch = max(1, feedBatch)
            self.maxFeedBatches = max(1, maxFeedBatches)
            self.fullReloadInterval = fullReloadInterval
            self.staleAfter = staleAfter
            self.maxFutureSkew = maxFutureSkew
        }
    }

    /// The source of truth.
    public nonisolated let store: any CutoffStore
    private let configuration: Configuration
    private let publish: @Sendable (CutoffSnapshot) -> Void
    private let clock: @Sendable () -> Int64
    private let logger: Logger

    /// The enforced cutoffs; `nil` until ``start()`` succeeded.
    private var table: CutoffTable?
    /// Set after a forced write was applied locally: the next poll must reload even if the marker is the same.
    private var needsFullReload = false
    /// Set while a poll runs for a change signal.
    private var signalPending = false
    private var lastMarker: String?
    private var lastFullReloadAt: Int64?
    private var gateBusy = false
    private var gateWaiters: [CheckedContinuation<Void, Never>] = []

    /// The snapshot most recently published.
    public private(set) var snapshot: CutoffSnapshot = .empty
    /// When (UNIX seconds, from the service's clock) the snapshot was last confirmed against the store.
    public private(set) var lastSyncAt: Int64?
    /// Why the last store operation failed, until the next successful sync.
    public private(set) var lastError: CutoffStoreError?
    /// The outage being reported: when it began, failures not yet in a log line, the last line's time and
    /// message. A store that stays down fails every poll (every second); one line each would bury the log.
    private var outage: (since: Int64, unreported: Int, total: Int, reportedAt: Int64, message: String)?
    /// While a store stays down with the same error, a line at most this often (seconds).
    static let outageReportInterval: Int64 = 60
    /// The enforced cutoffs found further ahead than ``Configuration/maxFutureSkew`` at the last reload.
    private var futureCutoffs = FutureCutoffs.none
    /// The last warning about them: when, and which it named.
    private var futureCutoffsReported: (at: Int64, cutoffs: FutureCutoffs)?
    /// The message of the last write the store's configuration refused, logged once until it changes or a write
    /// succeeds.
    private var writeRefusalReported: String?

    /// - Parameters:
    ///   - store: The source of truth.
    ///   - configuration: Intervals and limits.
    ///   - logger: Receives sync failures (messages from ``CutoffStoreError``; never a token).
    ///   - now: UNIX seconds; injectable for tests.
    ///   - publish: Makes a snapshot visible to the request path; called on the service's executor, in order.
    public init(
        store: any CutoffStore,
        configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "tokengate.cutoffs"),
        now: @escaping @Sendable () -> Int64 = CutoffSyncService.systemNow,
        publish: @escaping @Sendable (CutoffSnapshot) -> Void
    ) {
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.clock = now
        self.publish = publish
    }

    /// UNIX seconds from the system's real-time clock.
    @Sendable
    public static func systemNow() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec)
    }

    // MARK: Lifecycle

    /// Loads the whole store and publishes the first snapshot. Throws when the store cannot be read, and the
    /// gateway must then refuse to start: an empty snapshot would accept every revoked token.
    public func start() async throws {
        await self.enterGate()
        defer { self.leaveGate() }
        try await self.reloadLocked(marker: try? await self.store.changeMarker())
    }

    /// Polls the store until the task is cancelled, and syncs at once on every ``CutoffStore/changeSignals``
    /// hint the store pushes (PostgreSQL's LISTEN/NOTIFY): from the change feed when the store has one, else by a
    /// full reload. Call after ``start()``.
    ///
    /// Polling goes on next to the signals: a signal can be lost (a notification sent while the listening
    /// connection was down), and an operator's own SQL may change the store without sending one.
    public func run() async {
        let signals = self.store.changeSignals
        await withTaskGroup(of: Void.self) { group in
            if let signals {
                group.addTask {
                    for await _ in signals {
                        await self.signalled()
                    }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    do {
                        try await Task.sleep(for: await self.currentPollInterval)
                    } catch {
                        return
                    }
                    await self.poll()
                }
            }
            await group.waitForAll()
        }
    }

    /// Reloads the whole store now, whatever its change marker or feed says. Failures are recorded, logged and
    /// leave the snapshot, as in ``poll()``.
    public func resync() async {
        self.needsFullReload = true
        await self.poll()
    }

    /// A change signal: the feed is read at once (it catches up on whatever a lost signal announced); a store
    /// without one is reloaded whole.
    func signalled() async {
        if self.table?.position == nil {
            self.needsFullReload = true
        }
        self.signalPending = true
        await self.poll()
    }

    /// The feed's interval once the store showed it has one, else ``Configuration/pollInterval``.
    var currentPollInterval: Duration {
        self.table?.position == nil ? self.configuration.pollInterval : self.configuration.feedPollInterval
    }

    /// One poll: with a change feed, merge the changes since the last position; without one (or when the feed
    /// cannot tell), reload if the store's marker changed, a forced write is pending, or a full reload is due.
    /// Otherwise just confirm the store is reachable. Failures are recorded, logged and leave the snapshot.
    public func poll() async {
        await self.enterGate()
        defer {
            self.signalPending = false
            self.leaveGate()
        }
        do {
            let now = self.clock()
            let fullReloadDue = self.lastFullReloadAt.map {
                now - $0 >= self.configuration.fullReloadInterval.components.seconds
            } ?? true
            var feedNeedsReload = false
            if let table = self.table, let position = table.position, !fullReloadDue, !self.needsFullReload {
                switch try await self.followFeedLocked(from: position, table: table) {
                case .followed:
                    return
                case .cannotTell:
                    feedNeedsReload = true
                case .noFeed:
                    // A full load named a position but the store reads no feed (a store wrapping another): the
                    // marker decides from now on, as for any store without one; a signal reloads, as it does there.
                    self.table?.position = nil
                    feedNeedsReload = self.signalPending
                }
            }
            let marker = try await self.store.changeMarker()
            if self.table == nil || marker == nil || marker != self.lastMarker || fullReloadDue
                || self.needsFullReload || feedNeedsReload
            {
                try await self.reloadLocked(marker: marker)
            } else {
                self.lastSyncAt = now
                self.syncSucceeded(now: now)
            }
        } catch {
            self.recordFailure(error, during: "poll")
        }
    }

    /// Reloads the whole store now (after ``start()``), merging forward. Throws what the store threw.
    public func reload() async throws {
        await self.enterGate()
        defer { self.leaveGate() }
        do {
            try await self.reloadLocked(marker: try? await self.store.changeMarker())
        } catch {
            self.recordFailure(error, during: "reload")
            throw error
        }
    }

    /// Whether the snapshot has not been confirmed against the store for longer than
    /// ``Configuration/staleAfter`` (or never was).
    public func isStale(now: Int64) -> Bool {
        guard let lastSyncAt = self.lastSyncAt else {
            return true
        }
        return now - lastSyncAt > self.configuration.staleAfter.components.seconds
    }

    // MARK: Writes: store first, then publish, then return.

    /// Records a password change: every token of `user` issued before `at` (default: now) is rejected.
    @discardableResult
    public func passwordChanged(user: String, at: Int64? = nil, force: Bool = false) async throws -> CutoffReceipt {
        try await self.write(.passwordChanged(user: user, at: at ?? self.clock(), force: force))
    }

    /// "Disable mobile apps": every api token of `user` issued before `at` (default: now) is rejected.
    @discardableResult
    public func disableMobileApps(user: String, at: Int64? = nil, force: Bool = false) async throws -> CutoffReceipt {
        try await self.write(.disableMobileApps(user: user, at: at ?? self.clock(), force: force))
    }

    /// The emergency switch: every token issued before `at` (default: now) is rejected.
    @discardableResult
    public func revokeAll(at: Int64? = nil, force: Bool = false) async throws -> CutoffReceipt {
        try await self.write(.revokeAll(at: at ?? self.clock(), force: force))
    }

    /// The cutoffs of `user` as stored (read from the store, not the snapshot).
    public func cutoffs(for user: String) async throws -> CutoffLookup {
        try CutoffUserID.validate(user)
        do {
            return try await self.store.lookup(user: user)
        } catch {
            self.recordFailure(error, during: "lookup")
            throw error
        }
    }

    // MARK: Devices

    /// Whether the store keeps device records: the token page mints tokens with a device only then.
    public nonisolated var keepsDevices: Bool { self.store.keepsDevices }

    /// Records a device before its first token is handed over. Not behind the gate: it changes nothing the
    /// snapshot holds, so it need not wait for a reload in progress.
    public func recordDevice(_ record: DeviceRecord) async throws {
        do {
            try await self.store.recordDevice(record)
        } catch let error as CutoffStoreError where error.code == .invalidStoreConfiguration {
            self.recordWriteRefusal(error)
            throw error
        } catch {
            self.recordFailure(error, during: "device record")
            throw error
        }
    }

    /// The user's devices as stored.
    public func devices(user: String) async throws -> [DeviceRecord] {
        try CutoffUserID.validate(user)
        do {
            return try await self.store.devices(user: user)
        } catch {
            self.recordFailure(error, during: "device listing")
            throw error
        }
    }

    /// Revokes one device of `user` at `at` (default: now): stored, published, then returned, so a request sent
    /// after the answer is refused (`device_revoked`).
    public func revokeDevice(user: String, device: DeviceID, at: Int64? = nil) async throws -> DeviceReceipt {
        try CutoffUserID.validate(user)
        let at = at ?? self.clock()
        guard at >= 0, at <= self.clock() + self.configuration.maxFutureSkew.components.seconds else {
            throw CutoffStoreError(code: .invalidTime, message: "a revocation time must be from 1970 to now")
        }
        await self.enterGate()
        defer { self.leaveGate() }
        guard var table = self.table else {
            throw CutoffStoreError(code: .storeUnavailable, message: "the cutoff service has not started")
        }
        let revocation: DeviceRevocation
        do {
            revocation = try await self.store.revokeDevice(user: user, device: device, at: at)
        } catch let error as CutoffStoreError where error.code == .invalidStoreConfiguration {
            self.recordWriteRefusal(error)
            throw error
        } catch {
            self.recordFailure(error, during: "device revocation")
            throw error
        }
        let record = revocation.record
        if let revokedAt = record.revokedAt, table.revokedDevices[device] == nil {
            table.revokedDevices[device] = RevokedDevice(
                user: CutoffUserKey(record.user), revokedAt: revokedAt, tokensExpireBy: record.tokensExpireBy)
            self.install(table)
        }
        return DeviceReceipt(revocation: revocation, generation: self.snapshot.generation)
    }

    /// Rotates a refresh token through the store. A reuse revoked the device in the store; it is published here at
    /// once too, so this gateway refuses the device's access tokens before the refresh's answer goes out.
    public func rotateRefresh(_ rotation: RefreshRotation) async throws -> RefreshOutcome {
        let outcome: RefreshOutcome
        do {
            outcome = try await self.store.rotateRefresh(rotation)
        } catch {
            self.recordFailure(error, during: "refresh")
            throw error
        }
        if case .reused(let record) = outcome, let revokedAt = record.revokedAt {
            await self.enterGate()
            defer { self.leaveGate() }
            if var table = self.table, table.revokedDevices[record.device] == nil {
                table.revokedDevices[record.device] = RevokedDevice(
                    user: CutoffUserKey(record.user), revokedAt: revokedAt, tokensExpireBy: record.tokensExpireBy)
                self.install(table)
            }
        }
        return outcome
    }

    /// Drops the revoked devices whose tokens are all dead anyway (see "Devices" in the overview).
    private func pruneDevices(_ table: inout CutoffTable, now: Int64) {
        let margin = self.configuration.deviceExpiryMargin.components.seconds
        var dead: [DeviceID] = []
        for (device, revoked) in table.revokedDevices
        where revoked.isDead(
            userCutoffs: table.users[revoked.user], globalRevokedBefore: table.globalRevokedBefore, now: now,
            clockSkew: margin)
        {
            dead.append(device)
        }
        for device in dead {
            table.revokedDevices[device] = nil
        }
    }

    /// The write path: validate, commit to the store, apply to the enforced table, publish, return.
    public func write(_ write: CutoffWrite) async throws -> CutoffReceipt {
        try write.validate()
        let latest = self.clock() + self.configuration.maxFutureSkew.components.seconds
        guard write.at <= latest else {
            throw CutoffStoreError(
                code: .invalidTime,
                message: "a cutoff more than \(self.configuration.maxFutureSkew.components.seconds) s in the "
                    + "future would also reject tokens issued after it is set"
            )
        }

        await self.enterGate()
        defer { self.leaveGate() }
        guard var table = self.table else {
            throw CutoffStoreError(code: .storeUnavailable, message: "the cutoff service has not started")
        }
        let result: CutoffWriteResult
        do {
            result = try await self.store.apply(write)
        } catch let error as CutoffStoreError where error.code == .invalidStoreConfiguration {
            self.recordWriteRefusal(error)
            throw error
        } catch {
            self.recordFailure(error, during: "write")
            throw error
        }
        self.writeRefusalReported = nil

        // The store holds the write; now make the snapshot agree before anyone is told it is done.
        switch write {
        case .passwordChanged(let user, _, _):
            var cutoffs = table.users[CutoffUserKey(user)] ?? UserCutoffs()
            cutoffs.revokedBefore =
                result.forced ? result.cutoff : CutoffTable.later(cutoffs.revokedBefore, result.cutoff)
            table.users[CutoffUserKey(user)] = cutoffs
        case .disableMobileApps(let user, _, _):
            var cutoffs = table.users[CutoffUserKey(user)] ?? UserCutoffs()
            cutoffs.apiRevokedBefore =
                result.forced ? result.cutoff : CutoffTable.later(cutoffs.apiRevokedBefore, result.cutoff)
            table.users[CutoffUserKey(user)] = cutoffs
        case .revokeAll:
            table.globalRevokedBefore =
                result.forced ? result.cutoff : CutoffTable.later(table.globalRevokedBefore, result.cutoff)
        }
        if result.forced {
            // The store bumped its force epoch if the value moved back; reload at the next poll so that other
            // writers' forced changes are taken as they are too.
            self.needsFullReload = true
        }
        self.install(table)
        return CutoffReceipt(
            result: result,
            enforced: CutoffLookup(
                user: write.user.flatMap { table.users[CutoffUserKey($0)] } ?? UserCutoffs(),
                globalRevokedBefore: table.globalRevokedBefore
            ),
            generation: self.snapshot.generation
        )
    }
}

/// What a write through ``CutoffSyncService`` reports once it is durable and published.
public struct CutoffReceipt: Sendable, Hashable {
    /// What the store reported.
    public var result: CutoffWriteResult
    /// The written user's cutoffs (empty for ``CutoffWrite/revokeAll(at:force:)``) and the global cutoff, as
    /// the published snapshot enforces them.
    public var enforced: CutoffLookup
    /// The generation of the snapshot that contains the write.
    public var generation: UInt64

    public init(result: CutoffWriteResult, enforced: CutoffLookup, generation: UInt64) {
        self.result = result
        self.enforced = enforced
        self.generation = generation
    }
}

/// What ``CutoffSyncService/revokeDevice(user:device:at:)`` reports once durable and published.
public struct DeviceReceipt: Sendable, Hashable {
    public var revocation: DeviceRevocation
    /// The generation of the snapshot that enforces it.
    public var generation: UInt64

    public init(revocation: DeviceRevocation, generation: UInt64) {
        self.revocation = revocation
        self.generation = generation
    }
}

// MARK: Reloading, publishing and the gate.

extension CutoffSyncService {
    /// Loads the store and installs it, merged forward unless the force epoch changed. Caller holds the gate.
    ///
    /// The rows are merged into the enforced map as they are read (``CutoffStore/load(onto:)``). When the loaded
    /// force epoch turns out to be newer, that merge is thrown away and the store read again as it is: rare (an
    /// admin's force, a deleted row), and the one time a second map exists next to the enforced one.
    private func reloadLocked(marker: String?) async throws {
        var next: CutoffTable
        if let current = self.table {
            let merged = try await self.store.load(onto: current)
            if merged.forceEpoch > current.forceEpoch {
                // A cutoff was forced back (the epoch grew). The gate guarantees that no write of ours happened
                // between the load and now, so the store is the whole truth.
                next = try await self.store.load(onto: nil)
            } else {
                if merged.forceEpoch < current.forceEpoch {
                    // The epoch only grows. A lower one is an old backup copied over the store, or tables
                    // recreated: never let it drop a revocation the running gateway enforces.
                    self.logger.error(
                        "the cutoff store's force epoch went backwards (restored from a backup?); keeping every cutoff already enforced",
                        metadata: ["loaded": "\(merged.forceEpoch)", "enforced": "\(current.forceEpoch)"]
                    )
                }
                next = merged
            }
        } else {
            next = try await self.store.load(onto: nil)
        }
        let now = self.clock()
        self.pruneDevices(&next, now: now)
        let changed = next != self.table
        self.needsFullReload = false
        self.lastMarker = marker
        self.lastFullReloadAt = now
        self.lastSyncAt = now
        self.syncSucceeded(now: now)
        if changed {
            self.install(next)
        }
        self.futureCutoffs = FutureCutoffs(in: next, after: now + self.configuration.maxFutureSkew.components.seconds)
        self.reportFutureCutoffs(now: now)
    }

    /// Merges the feed's changes since `position` into the enforced table and publishes it if anything changed.
    /// Caller holds the gate.
    ///
    /// - Returns: ``FeedOutcome/cannotTell`` when the feed cannot say what changed, and the caller reloads
    ///   everything: the feed was renumbered (another file or database, a restored backup: another feed name, or a
    ///   sequence lower than the one seen), the force epoch moved (a cutoff forced back or a row deleted, which
    ///   changed rows cannot express), or more than ``Configuration/maxFeedBatches`` reads were waiting.
    private func followFeedLocked(
        from position: CutoffFeedPosition,
        table enforced: CutoffTable
    ) async throws -> FeedOutcome {
        var table = enforced
        var position = position
        var changed = false
        var changedUsers: [CutoffChanges.ChangedUser] = []
        for _ in 0..<self.configuration.maxFeedBatches {
            guard let changes = try await self.store.changes(since: position, limit: self.configuration.feedBatch)
            else {
                return .noFeed
            }
            guard changes.position.feed == position.feed, changes.position.sequence >= position.sequence else {
                self.logger.notice(
                    "the cutoff store's change feed was renumbered (another file or database, or a restored backup); reloading everything",
                    metadata: ["was": "\(position)", "now": "\(changes.position)"]
                )
                return .cannotTell
            }
            guard changes.forceEpoch == table.forceEpoch else {
                return .cannotTell
            }
            let global = CutoffTable.later(table.globalRevokedBefore, changes.globalRevokedBefore)
            if global != table.globalRevokedBefore {
                table.globalRevokedBefore = global
                changed = true
            }
            for user in changes.users where table.mergeForward(user.user, user.cutoffs) {
                changed = true
                changedUsers.append(user)
            }
            for (device, revoked) in changes.revokedDevices where table.revokedDevices[device] == nil {
                table.revokedDevices[device] = revoked
                changed = true
            }
            position = changes.position
            table.position = position
            guard changes.hasMore else {
                let now = self.clock()
                self.lastSyncAt = now
                self.syncSucceeded(now: now)
                if changed {
                    self.install(table)
                    let limit = now + self.configuration.maxFutureSkew.components.seconds
                    self.futureCutoffs.note(global: table.globalRevokedBefore, after: limit)
                    for user in changedUsers {
                        self.futureCutoffs.note(user.user, table.users[user.user] ?? user.cutoffs, after: limit)
                    }
                    self.reportFutureCutoffs(now: now)
                } else {
                    self.table = table
                }
                return .followed
            }
        }
        self.logger.info(
            "more cutoff changes are waiting than the change feed reads at once; reloading everything",
            metadata: ["rows": "\(self.configuration.feedBatch * self.configuration.maxFeedBatches)"]
        )
        return .cannotTell
    }

    /// What reading the change feed came to.
    enum FeedOutcome {
        /// The changes are merged (and published, if any).
        case followed
        /// The feed cannot say what changed: reload everything.
        case cannotTell
        /// The store reads no feed.
        case noFeed
    }

    /// Logs the cutoffs of the enforced table that are further ahead than a write may set (``futureCutoffs``): at
    /// once when there are new ones, else at most every ``outageReportInterval`` while syncs find them.
    ///
    /// The line names up to five user ids (the admin API's audit lines name users too; never a token), the number,
    /// and how far ahead the furthest is. A cutoff in milliseconds reads as tens of thousands of years ahead.
    private func reportFutureCutoffs(now: Int64) {
        let skew = self.configuration.maxFutureSkew.components.seconds
        let future = self.futureCutoffs
        guard !future.isEmpty else {
            self.futureCutoffsReported = nil
            return
        }
        if let reported = self.futureCutoffsReported, future.isContained(in: reported.cutoffs),
            now - reported.at < Self.outageReportInterval
        {
            return
        }
        self.futureCutoffsReported = (now, future)
        var metadata: Logger.Metadata = [
            "count": "\(future.count(after: now + skew))",
            "furthest_ahead_s": "\((future.furthest ?? now) - now)",
            "max_future_skew_s": "\(skew)",
        ]
        if !future.users.isEmpty {
            metadata["users"] = .array(future.someUsers(5).map { .string($0) })
        }
        if future.global != nil {
            metadata["global"] = "true"
        }
        self.logger.warning(
            "the cutoff store holds cutoffs more than \(skew) s in the future (a clock ahead, or times in milliseconds?); they are enforced as they are and reject even tokens issued after them: fix them where they are stored (lowered there, they take effect at the next restart)",
            metadata: metadata
        )
    }

    /// How many enforced cutoffs are further ahead of `now` than a write may set: what the last reload found,
    /// less those that time has caught up with. The gateway exports it as `tokengate_cutoff_future_cutoffs`.
    public func futureCutoffCount(now: Int64) -> Int {
        self.futureCutoffs.count(after: now + self.configuration.maxFutureSkew.components.seconds)
    }

    /// A write the store refused for its configuration: an error line the first time (and when the reason
    /// changes), never ``lastError``.
    private func recordWriteRefusal(_ error: CutoffStoreError) {
        guard self.writeRefusalReported != error.message else {
            return
        }
        self.writeRefusalReported = error.message
        self.logger.error(
            "the cutoff store refuses writes: a configuration problem, not an outage (reads and enforcement go on); revocations through the admin API and `tokengate revoke` fail until it is fixed",
            metadata: ["error": "\(error)"]
        )
    }

    private func install(_ table: CutoffTable) {
        var table = table
        // Off the request path, and one of the base's tables at a time: the table it replaces goes with the snapshot
        // before this one, so no more than a 64th of the users exists twice.
        table.users.foldStep()
        let generation = self.snapshot.generation &+ 1
        let snapshot = CutoffSnapshot(
            globalRevokedBefore: table.globalRevokedBefore,
            users: table.users,
            generation: generation,
            revokedDevices: table.revokedDevices
        )
        self.table = table
        self.snapshot = snapshot
        self.publish(snapshot)
    }

    private func recordFailure(_ error: any Error, during operation: String) {
        let storeError =
            (error as? CutoffStoreError)
            ?? CutoffStoreError(code: .storeUnavailable, message: "\(self.store.storeDescription): \(error)")
        switch storeError.code {
        case .invalidUserID, .invalidTime, .cutoffWouldMoveBackward, .readOnlyStore:
            // The caller's mistake, not the store's health.
            return
        default:
            self.lastError = storeError
            let now = self.clock()
            let message = "\(storeError)"
            if var outage = self.outage {
                outage.unreported += 1
                outage.total += 1
                // The same failure again: a line only every `outageReportInterval`, with the count since the last.
                if message == outage.message, now - outage.reportedAt < Self.outageReportInterval {
                    self.outage = outage
                    return
                }
                self.logger.warning(
                    "cutoff store \(operation) still failing; keeping the last snapshot",
                    metadata: [
                        "error": "\(storeError)", "generation": "\(self.snapshot.generation)",
                        "failures": "\(outage.unreported)", "failing_for_s": "\(now - outage.since)",
                    ]
                )
                self.outage = (outage.since, 0, outage.total, now, message)
            } else {
                self.logger.warning(
                    "cutoff store \(operation) failed; keeping the last snapshot",
                    metadata: ["error": "\(storeError)", "generation": "\(self.snapshot.generation)"]
                )
                self.outage = (now, 0, 1, now, message)
            }
        }
    }

    /// A sync went through: the error is cleared, and the end of an outage is logged.
    private func syncSucceeded(now: Int64) {
        self.lastError = nil
        guard let outage = self.outage else { return }
        self.outage = nil
        self.logger.notice(
            "cutoff store recovered",
            metadata: ["failures": "\(outage.total)", "failed_for_s": "\(now - outage.since)"]
        )
    }

    private func enterGate() async {
        if !self.gateBusy {
            self.gateBusy = true
            return
        }
        await withCheckedContinuation { continuation in
            self.gateWaiters.append(continuation)
        }
    }

    private func leaveGate() {
        if self.gateWaiters.isEmpty {
            self.gateBusy = false
        } else {
            // Ownership passes directly to the next waiter; gateBusy stays true.
            self.gateWaiters.removeFirst().resume()
        }
    }
}
