//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL
internal import CTokengatePQ
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOPosix

// MARK: Connection settings, borrowing a connection, errors.

extension PostgresCutoffStore {
    /// libpq connection keywords and their values, in two parallel arrays as `PQconnectStartParams` takes them.
    struct ConnectParameters: Sendable {
        var keywords: [String] = []
        var values: [String] = []

        mutating func set(_ keyword: String, _ value: String) {
            self.keywords.append(keyword)
            self.values.append(value)
        }

        /// These settings for one connection attempt: with the password file's content as it is now, when there
        /// is a password file (see ``Configuration/passwordFile``).
        ///
        /// - Throws: ``CutoffStoreError/Code/storeUnavailable`` naming the file when it cannot be read (logged by
        ///   ``PostgresPasswordFile``); the attempt fails, the store stays unavailable until the file is readable.
        func forConnecting(
            passwordFile: PostgresPasswordFile?, store description: String
        ) throws(CutoffStoreError) -> ConnectParameters {
            guard let passwordFile else {
                return self
            }
            var parameters = self
            parameters.set("password", try passwordFile.passwordForConnection(store: description))
            return parameters
        }
    }

    /// The libpq settings for ``Configuration``.
    ///
    /// - `sslmode`: ``TLSMode/disable`` → `disable`, ``TLSMode/prefer`` → `prefer`, ``TLSMode/require`` →
    ///   `verify-full` with `sslrootcert` = ``Configuration/tlsCAFile``, or the system's trust store (libpq 16
    ///   knows `system`; libpq 15 needs the file, which is OpenSSL's default CA file or `SSL_CERT_FILE`).
    /// - `gssencmode=disable`: otherwise libpq first tries GSSAPI encryption whenever a Kerberos credential cache
    ///   exists, which is neither configured nor wanted here.
    /// - `connect_timeout` is not set: libpq honours it only in its blocking connect; ours is
    ///   `PQconnectStartParams`/`PQconnectPoll` bounded by ``Configuration/connectTimeout`` (see
    ///   ``PostgresConnection``).
    /// - Pooled sessions get `statement_timeout` = ``Configuration/operationTimeout``, so the server abandons a
    ///   statement whose caller gave up; the LISTEN connection runs no statements after `LISTEN`.
    /// - TCP keepalives (30 s idle, then 3 probes 10 s apart), so a LISTEN connection to a vanished server is
    ///   noticed in about a minute even though it sends nothing.
    ///
    /// No password means none is sent by us; as for any libpq client, `PGPASSWORD` or `~/.pgpass` of the user
    /// running tokengate may still supply one. A ``Configuration/passwordFile`` is not read here but at each
    /// connection attempt (``ConnectParameters/forConnecting(passwordFile:store:)``).
    ///
    /// - Throws: ``CutoffStoreError/Code/invalidStoreConfiguration`` for a value with a NUL byte (C strings end
    ///   there), a host list (libpq would read `a,b` as two hosts), or an unreadable CA file.
    static func connectParameters(_ configuration: Configuration, listening: Bool) throws -> ConnectParameters {
        func invalid(_ message: String) -> CutoffStoreError {
            CutoffStoreError(code: .invalidStoreConfiguration, message: "postgres: \(message)")
        }
        for (name, value) in [
            ("host", configuration.host), ("user", configuration.user), ("database", configuration.database),
            ("password", configuration.password ?? ""), ("TLS CA file", configuration.tlsCAFile ?? ""),
        ] where value.utf8.contains(0) {
            // The value itself is not shown: it may be the password.
            throw invalid("the \(name) contains a NUL byte")
        }
        guard !configuration.host.isEmpty, !configuration.host.contains(",") else {
            throw invalid("the host must be one host name or address")
        }
        guard (1...65535).contains(configuration.port) else {
            throw invalid("the port is out of range")
        }
        var parameters = ConnectParameters()
        parameters.set("host", configuration.host)
        parameters.set("port", String(configuration.port))
        parameters.set("user", configuration.user)
        parameters.set("dbname", configuration.database)
        if let password = configuration.password {
            parameters.set("password", password)
        }
        if configuration.tls.isDisabled {
            parameters.set("sslmode", "disable")
        } else if configuration.tls.isRequired {
            parameters.set("sslmode", "verify-full")
            parameters.set("sslrootcert", try Self.trustRoots(configuration))
        } else {
            // libpq's `prefer`: encryption if offered, no certificate check (documented on TLSMode.prefer).
            parameters.set("sslmode", "prefer")
        }
        parameters.set("gssencmode", "disable")
        parameters.set("application_name", listening ? "tokengate-listen" : "tokengate")
        parameters.set("client_encoding", "UTF8")
        if !listening {
            parameters.set("options", "-c statement_timeout=\(configuration.operationTimeout.millisecondsClamped)")
        }
        parameters.set("keepalives", "1")
        parameters.set("keepalives_idle", "30")
        parameters.set("keepalives_interval", "10")
        parameters.set("keepalives_count", "3")
        return parameters
    }

    /// The CA file for `verify-full`, checked now so a typo fails at start rather than at the first connection.
    private static func trustRoots(_ configuration: Configuration) throws -> String {
        if let caFile = configuration.tlsCAFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else {
                throw CutoffStoreError(
                    code: .invalidStoreConfiguration,
                    message: "postgres: the TLS settings cannot be used (CA file \(caFile) is not readable)")
            }
            return caFile
        }
        if PQlibVersion() >= 160000 {
            return "system"
        }
        let variable = String(cString: X509_get_default_cert_file_env())
        let file = ProcessInfo.processInfo.environment[variable] ?? String(cString: X509_get_default_cert_file())
        guard FileManager.default.isReadableFile(atPath: file) else {
            throw CutoffStoreError(
                code: .invalidStoreConfiguration,
                message: "postgres: tls require without a CA file needs the system's trust store, but \(file) is "
                    + "not readable (install ca-certificates, or set the CA file)")
        }
        return file
    }

    /// Runs `body` with a pooled connection on a thread of the thread pool, within
    /// ``Configuration/operationTimeout`` (the wait for a connection included); maps every failure to a
    /// ``CutoffStoreError``.
    ///
    /// Ordering: the deadline is fixed first and shared by the wait for a connection, the connect and every
    /// statement. The lease is given back exactly once: by the thread after `body` (even when it throws), or here
    /// when the thread pool refused the work before it started (stopped, or the caller was cancelled while the
    /// work was queued). If the caller stops waiting (timeout, cancellation), the interrupt fires and the thread
    /// leaves its `poll()` at once, dropping the connection it was using.
    func withConnection<T: Sendable>(
        timeout: Duration? = nil,
        _ body: @escaping @Sendable (PostgresSession) throws -> T
    ) async throws -> T {
        if self.isClosed {
            throw CutoffStoreError(code: .storeUnavailable, message: "\(self.storeDescription): the store is closed")
        }
        let pool = self.pool
        let threadPool = self.threadPool
        let parameters = self.poolParameters
        let passwordFile = self.passwordFile
        let description = self.storeDescription
        let timeout = timeout ?? self.configuration.operationTimeout
        let connectTimeout = self.configuration.connectTimeout
        do {
            let value = try await withDeadline(
                timeout,
                timeoutError: {
                    CutoffStoreError(
                        code: .storeUnavailable,
                        message:
                            "\(description): no answer within \(timeout) (is the server up, and store.run() running?)"
                    )
                }
            ) {
                let deadline = ContinuousClock.now.advanced(by: timeout)
                let interrupt = try PostgresInterrupt()
                let lease = try await pool.lease()
                let started = NIOLockedValueBox(false)
                do {
                    return try await withTaskCancellationHandler {
                        try await threadPool.runIfActive {
                            started.withLockedValue { $0 = true }
                            return try Self.perform(
                                lease, pool: pool, parameters: parameters, passwordFile: passwordFile,
                                description: description, deadline: deadline, connectTimeout: connectTimeout,
                                interrupt: interrupt, body)
                        }
                    } onCancel: {
                        interrupt.fire()
                    }
                } catch {
                    if !started.withLockedValue({ $0 }) {
                        if case .idle(let connection) = lease {
                            pool.giveBack(connection)
                        } else {
                            pool.giveBack(nil)
                        }
                    }
                    throw error
                }
            }
            self.lastLoggedDetail.withLockedValue { $0 = nil }
            return value
        } catch {
            throw self.storeError(error)
        }
    }

    /// On a pool thread: connects if the lease is a slot (or the idle connection turned out dead), runs `body`,
    /// gives the lease back. The password file is read only when connecting.
    private static func perform<T>(
        _ lease: PostgresConnectionPool.Lease,
        pool: PostgresConnectionPool,
        parameters: ConnectParameters,
        passwordFile: PostgresPasswordFile?,
        description: String,
        deadline: ContinuousClock.Instant,
        connectTimeout: Duration,
        interrupt: PostgresInterrupt,
        _ body: (PostgresSession) throws -> T
    ) throws -> T {
        var connection: PostgresConnection?
        defer { pool.giveBack(connection) }
        if case .idle(let idle) = lease, idle.isAliveWhileIdle() {
            connection = idle
        } else {
            // A dead idle connection (the server restarted, or closed it) is replaced within the same slot, so
            // a server restart costs no failed call.
            let attempt = try parameters.forConnecting(passwordFile: passwordFile, store: description)
            connection = try PostgresConnection.connect(
                keywords: attempt.keywords,
                values: attempt.values,
                deadline: min(deadline, ContinuousClock.now.advanced(by: connectTimeout)),
                interrupt: interrupt
            )
        }
        guard let connection else {
            preconditionFailure("connected above or threw")
        }
        return try body(PostgresSession(connection: connection, deadline: deadline, interrupt: interrupt))
    }

    /// A ``CutoffStoreError`` for any failure: our own words and the SQLSTATE, never libpq's or the server's text
    /// (that is logged here, once per distinct text, so an outage names its cause in the log without repeating it
    /// at every poll). Never the password: libpq's messages do not contain it, and ours do not mention it.
    nonisolated func storeError(_ error: any Error) -> CutoffStoreError {
        let description = self.storeDescription
        if let error = error as? CutoffStoreError {
            return error
        }
        if let failure = error as? PostgresFailure {
            if let detail = failure.detail {
                let isNew = self.lastLoggedDetail.withLockedValue { last in
                    defer { last = detail }
                    return last != detail
                }
                self.logger.log(
                    level: isNew ? .warning : .debug,
                    "cutoff store: PostgreSQL says",
                    metadata: [
                        "store": "\(description)", "failure": "\(failure.summary)", "postgres": "\(detail)",
                    ]
                )
            }
            let code: CutoffStoreError.Code = failure.kind == .unexpectedResult ? .invalidStoreFile : .storeUnavailable
            return CutoffStoreError(code: code, message: "\(description): \(failure.summary)")
        }
        if error is CancellationError {
            return CutoffStoreError(code: .storeUnavailable, message: "\(description): cancelled")
        }
        if error is NIOThreadPoolError.ThreadPoolInactive {
            return CutoffStoreError(code: .storeUnavailable, message: "\(description): store.run() is not running")
        }
        return CutoffStoreError(code: .storeUnavailable, message: "\(description): \(error)")
    }
}
