//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import TokengateHTTP
import TokengateStores
import TokengateTokens

/// The admin API's logic as a pure async handler; the gateway wires it to its admin listener (when `admin:` is
/// configured; a secret is required off loopback) and turns ``AdminResponse`` into HTTP.
///
/// Routes (ids are percent-decoded path segments, so an id may contain `/` as `%2F`):
/// - `POST /admin/users/{id}/password-changed`: `revoked_before` = `at` (default now).
/// - `POST /admin/users/{id}/disable-mobile-apps`: `api_revoked_before` = `at` (default now).
/// - `GET /admin/users/{id}`: the stored cutoffs of the user and the global cutoff.
/// - `POST /admin/revoke-all`: the global cutoff = `at` (default now).
/// - `GET /admin/users/{id}/devices`: the user's devices (newest first, revoked ones too): `device`, `app`,
///   `created_at`, `last_used_at`, `tokens_expire_by`, `revoked_at`.
/// - `POST /admin/users/{id}/devices/{device}/revoke`: revokes that one device now (no body, or `{}`): every token
///   of it is refused, the user's other devices and sessions keep working. 404 `unknown_device` when the user has
///   no such device; 409 `no_device_store` when the store keeps none (the JSON file).
///
/// The POST body is optional: `{"at": 1714564800 or "2024-05-01T12:00:00Z", "force": true}`; unknown keys are
/// refused so that a typo such as `"forse"` cannot silently change what happens, and so are repeated ones
/// (``repeatedMember(_:)``), so that which of two values counts is never a parser's choice. A write answers 200 only after
/// the store committed it and the snapshot containing it was published (see ``CutoffSyncService``).
///
/// Errors: 400 `invalid_user_id` / `invalid_time` / `invalid_request`, 404 `not_found`, 405
/// `method_not_allowed` (with `Allow`), 409 `cutoff_would_move_backward` (with the kept `current` value) or
/// `read_only_store`, 413 `request_too_large`, 500 `store_write_refused` (a write the store's configuration refuses:
/// a PostgreSQL role without the privilege, a SQLite file this process may not write; the answer carries the
/// store's message, which names the `GRANT` or the file to fix, as `tokengate revoke` prints it), 503
/// `store_unavailable`. The 503 does not repeat the store's own message (file paths, SQLite errors); the service
/// logs that.
///
/// Every write is logged at `notice` (``audit(_:user:options:client:outcome:)``): who asked (the peer address),
/// what (the endpoint, the user, `at`, `force`) and what came of it (the cutoff now in force, whether it
/// changed, a refusal's code). A cutoff moved back with `force` un-revokes tokens; an operator must be able
/// to see afterwards that it happened, and from where.
public struct AdminAPI: Sendable {
    /// The service that writes through to the store and publishes snapshots.
    public let service: CutoffSyncService
    /// Larger request bodies get 413.
    public let maxBodyBytes: Int
    private let logger: Logger

    public init(service: CutoffSyncService, maxBodyBytes: Int = 4096, logger: Logger = Logger(label: "tokengate.admin")) {
        self.service = service
        self.maxBodyBytes = maxBodyBytes
        self.logger = logger
    }

    private enum Route {
        case passwordChanged(rawID: Substring)
        case disableMobileApps(rawID: Substring)
        case user(rawID: Substring)
        case revokeAll
        case devices(rawID: Substring)
        case revokeDevice(rawID: Substring, device: Substring)

        var allowedMethod: String {
            switch self {
            case .passwordChanged, .disableMobileApps, .revokeAll, .revokeDevice: return "POST"
            case .user, .devices: return "GET"
            }
        }
    }

    /// Handles one admin request. Never throws: every failure becomes a JSON error answer. `client` (the peer's
    /// address) is for the audit line of a write.
    public func handle(method: String, path: String, body: [UInt8], client: String? = nil) async -> AdminResponse {
        guard let route = Self.route(path) else {
            return .error(404, "not_found", "no such admin endpoint")
        }
        guard method == route.allowedMethod else {
            return .error(
                405,
                "method_not_allowed",
                "this endpoint accepts \(route.allowedMethod) only",
                headers: ["Allow": route.allowedMethod]
            )
        }
        let writing = route.allowedMethod == "POST"
        do {
            switch route {
            case .user(let rawID):
                let user = try Self.decodeUserID(rawID)
                let lookup = try await self.service.cutoffs(for: user)
                return Self.userAnswer(user: user, lookup: lookup, receipt: nil)
            case .passwordChanged(let rawID):
                let user = try Self.decodeUserID(rawID)
                let options = try self.writeOptions(body)
                let receipt = try await self.audit("password-changed", user: user, options: options, client: client) {
                    try await self.service.passwordChanged(user: user, at: options.at, force: options.force)
                }
                return Self.userAnswer(user: user, lookup: receipt.enforced, receipt: receipt)
            case .disableMobileApps(let rawID):
                let user = try Self.decodeUserID(rawID)
                let options = try self.writeOptions(body)
                let receipt = try await self.audit("disable-mobile-apps", user: user, options: options, client: client) {
                    try await self.service.disableMobileApps(user: user, at: options.at, force: options.force)
                }
                return Self.userAnswer(user: user, lookup: receipt.enforced, receipt: receipt)
            case .devices(let rawID):
                let user = try Self.decodeUserID(rawID)
                let devices = try await self.service.devices(user: user)
                var writer = JSONWriter()
                writer.field("user", user)
                writer.field("devices", objects: devices.map(Self.deviceObject))
                return AdminResponse(status: 200, json: writer.finished())
            case .revokeDevice(let rawID, let rawDevice):
                let user = try Self.decodeUserID(rawID)
                guard let device = DeviceID(String(rawDevice)) else {
                    throw RequestError(message: "the device id must be 22 characters of base64url")
                }
                let options = try self.writeOptions(body)
                guard options.at == nil, !options.force else {
                    throw RequestError(message: "a device is revoked now: the body takes no \"at\" or \"force\"")
                }
                var metadata: Logger.Metadata = ["action": "revoke-device", "user": .string(user), "device": .string(device.text)]
                if let client { metadata["client"] = .string(client) }
                let receipt: DeviceReceipt
                do {
                    receipt = try await self.service.revokeDevice(user: user, device: device)
                } catch let error as CutoffStoreError
                    where error.code == .unknownDevice || error.code == .noDevices || error.code == .invalidStoreConfiguration
                {
                    metadata["error"] = .string(
                        error.code == .invalidStoreConfiguration ? Self.storeWriteRefused : error.code.description)
                    self.logger.notice("device revocation refused", metadata: metadata)
                    throw error
                }
                metadata["changed"] = .string(String(receipt.revocation.changed))
                self.logger.notice("device revoked", metadata: metadata)
                var writer = Self.deviceObject(receipt.revocation.record)
                writer.field("user", user)
                writer.field("changed", receipt.revocation.changed)
                writer.field("generation", receipt.generation)
                return AdminResponse(status: 200, json: writer.finished())
            case .revokeAll:
                let options = try self.writeOptions(body)
                let receipt = try await self.audit("revoke-all", user: nil, options: options, client: client) {
                    try await self.service.revokeAll(at: options.at, force: options.force)
                }
                var writer = JSONWriter()
                writer.field("global_revoked_before", receipt.enforced.globalRevokedBefore)
                writer.field("changed", receipt.result.changed)
                writer.field("generation", receipt.generation)
                return AdminResponse(status: 200, json: writer.finished())
            }
        } catch let error as RequestError {
            return .error(error.status, error.error, error.message)
        } catch let error as CutoffStoreError {
            return Self.answer(for: error, writing: writing)
        } catch {
            return .error(503, "store_unavailable", "the cutoff store is unavailable; the last snapshot stays in force")
        }
    }

    // MARK: The audit line

    /// Runs `write` and logs its outcome at `notice`: `cutoff written` with the cutoff in force and whether it
    /// changed, or `cutoff write refused` with the refusal's code. A store failure is logged by the service.
    private func audit(
        _ action: String,
        user: String?,
        options: WriteOptions,
        client: String?,
        write: () async throws -> CutoffReceipt
    ) async throws -> CutoffReceipt {
        var metadata: Logger.Metadata = ["action": .string(action), "force": .string(String(options.force))]
        if let user { metadata["user"] = .string(user) }
        if let at = options.at { metadata["at"] = .string(String(at)) }
        if let client { metadata["client"] = .string(client) }
        do {
            let receipt = try await write()
            metadata["cutoff"] = .string(String(receipt.result.cutoff))
            metadata["changed"] = .string(String(receipt.result.changed))
            self.logger.notice("cutoff written", metadata: metadata)
            return receipt
        } catch let error as CutoffStoreError
            where error.code == .cutoffWouldMoveBackward || error.code == .readOnlyStore
            || error.code == .invalidStoreConfiguration
        {
            metadata["error"] = .string(
                error.code == .invalidStoreConfiguration ? Self.storeWriteRefused : error.code.description)
            self.logger.notice("cutoff write refused", metadata: metadata)
            throw error
        }
    }

    // MARK: Routing and decoding

    private static func route(_ path: String) -> Route? {
        // The query is not part of any route; nothing in it is used.
        let pathOnly = path.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let segments = pathOnly.split(separator: "/", omittingEmptySubsequences: false)
        guard segments.count >= 3, segments[0].isEmpty, segments[1] == "admin" else {
            return nil
        }
        switch segments.count {
        case 3 where segments[2] == "revoke-all":
            return .revokeAll
        case 4 where segments[2] == "users" && !segments[3].isEmpty:
            return .user(rawID: segments[3])
        case 5 where segments[2] == "users" && !segments[3].isEmpty && segments[4] == "password-changed":
            return .passwordChanged(rawID: segments[3])
        case 5 where segments[2] == "users" && !segments[3].isEmpty && segments[4] == "disable-mobile-apps":
            return .disableMobileApps(rawID: segments[3])
        case 5 where segments[2] == "users" && !segments[3].isEmpty && segments[4] == "devices":
            return .devices(rawID: segments[3])
        case 7 where segments[2] == "users" && !segments[3].isEmpty && segments[4] == "devices"
            && !segments[5].isEmpty && segments[6] == "revoke":
            return .revokeDevice(rawID: segments[3], device: segments[5])
        default:
            return nil
        }
    }

    /// Percent-decodes a path segment strictly (every `%` needs two hex digits; the result must be UTF-8) and
    /// validates it as a user id.
    package static func decodeUserID(_ raw: Substring) throws -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.utf8.count)
        var iterator = raw.utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(Self.hexValue), let low = iterator.next().flatMap(Self.hexValue)
                else {
                    throw CutoffStoreError(code: .invalidUserID, message: "the user id has a malformed percent-escape")
                }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
            // A named JWT issuer's user is `NAME%1FUSER` (``IssuerScopedUser``), the id itself bounded below.
            if bytes.count > CutoffUserID.maxStoredUTF8Bytes {
                throw CutoffStoreError(
                    code: .invalidUserID,
                    message: "the user id is longer than \(CutoffUserID.maxUTF8Bytes) bytes of UTF-8"
                )
            }
        }
        guard let id = String(validating: bytes, as: UTF8.self) else {
            throw CutoffStoreError(code: .invalidUserID, message: "the user id is not valid UTF-8")
        }
        try CutoffUserID.validate(id)
        return id
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// A malformed or oversized request body (time and id problems are ``CutoffStoreError``s).
    private struct RequestError: Error {
        var status = 400
        var error = "invalid_request"
        let message: String
    }

    private struct WriteOptions {
        var at: Int64?
        var force = false
    }

    private func writeOptions(_ body: [UInt8]) throws -> WriteOptions {
        guard body.count <= self.maxBodyBytes else {
            throw RequestError(status: 413, error: "request_too_large", message: "the request body is too large")
        }
        var options = WriteOptions()
        let whitespace: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        if body.allSatisfy({ whitespace.contains($0) }) {
            return options
        }
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: Data(body))
        } catch {
            throw RequestError(message: "the body is not valid JSON")
        }
        guard case .object(let object) = JSONScalar(root) else {
            throw RequestError(message: "the body must be a JSON object")
        }
        if let name = Self.repeatedMember(body) {
            throw RequestError(message: "the body names \"\(name)\" more than once")
        }
        for (key, value) in object {
            switch key {
            case "at":
                switch JSONScalar(value) {
                case .null:
                    options.at = nil
                case .integer(let seconds):
                    guard seconds >= 0 else {
                        throw CutoffStoreError(code: .invalidTime, message: "\"at\" must not be before 1970")
                    }
                    options.at = seconds
                case .string(let text):
                    options.at = try CutoffTime.parse(text)
                case let other:
                    throw CutoffStoreError(
                        code: .invalidTime,
                        message: "\"at\" must be UNIX seconds or an RFC 3339 string, not \(other.kindDescription)"
                    )
                }
            case "force":
                guard case .bool(let force) = JSONScalar(value) else {
                    throw RequestError(message: "\"force\" must be true or false")
                }
                options.force = force
            default:
                // Named when it is short printable ASCII (it is the caller's own input, echoed in the answer).
                let printable = key.utf8.count <= 64 && key.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") }
                let named = printable ? "unknown field \"\(key)\"" : "an unknown field"
                throw RequestError(message: "\(named) in the body (expected \"at\" and \"force\")")
            }
        }
        return options
    }

    /// The first top-level member name `body` repeats, with escapes resolved (`"forc\u0065"` is `force`), or
    /// `nil`. `body` is one JSON object that `JSONSerialization` already accepted.
    ///
    /// `JSONSerialization` keeps the last of repeated names, so `{"at":1000,"force":false,"force":true}` read
    /// as a forced move backward, while a reviewer, a log line or another parser reads `force: false`. A
    /// body whose meaning depends on which duplicate wins is refused, as the token parser refuses a repeated
    /// header or claim name. The scan only tracks strings and nesting: the syntax was checked already.
    package static func repeatedMember(_ body: [UInt8]) -> String? {
        var seen: Set<String> = []
        var depth = 0
        // At the top level, the next string is a member name: right after `{` or after a `,`.
        var expectingName = false
        var index = 0
        while index < body.count {
            let byte = body[index]
            switch byte {
            case UInt8(ascii: "\""):
                let start = index
                index += 1
                while index < body.count, body[index] != UInt8(ascii: "\"") {
                    index += body[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                if depth == 1, expectingName, index < body.count {
                    expectingName = false
                    let token = Data(body[start...index])
                    // The name's own escapes are resolved by the same parser that read the body; a name it cannot
                    // read again (it read it once) is refused rather than skipped.
                    guard let name = (try? JSONSerialization.jsonObject(with: token, options: .fragmentsAllowed)) as? String
                    else { return String(decoding: token, as: UTF8.self) }
                    if !seen.insert(name).inserted { return name }
                }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                expectingName = depth == 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
            case UInt8(ascii: ","):
                expectingName = depth == 1
            default:
                break
            }
            index += 1
        }
        return nil
    }

    // MARK: Answers

    private static func userAnswer(user: String, lookup: CutoffLookup, receipt: CutoffReceipt?) -> AdminResponse {
        var writer = JSONWriter()
        writer.field("user", user)
        writer.field("revoked_before", lookup.user.revokedBefore)
        writer.field("api_revoked_before", lookup.user.apiRevokedBefore)
        writer.field("global_revoked_before", lookup.globalRevokedBefore)
        if let receipt {
            writer.field("changed", receipt.result.changed)
            writer.field("generation", receipt.generation)
        }
        return AdminResponse(status: 200, json: writer.finished())
    }

    /// One device as the admin API shows it.
    private static func deviceObject(_ record: DeviceRecord) -> JSONWriter {
        var writer = JSONWriter()
        writer.field("device", record.device.text)
        writer.field("app", record.app)
        writer.field("created_at", record.createdAt)
        writer.field("last_used_at", record.lastUsedAt)
        writer.field("tokens_expire_by", record.tokensExpireBy)
        writer.field("revoked_at", record.revokedAt)
        return writer
    }

    /// The `error` code of a write the store's configuration refuses.
    package static let storeWriteRefused = "store_write_refused"

    /// The answer to a store error; `writing` tells a write (POST) from a lookup.
    private static func answer(for error: CutoffStoreError, writing: Bool) -> AdminResponse {
        switch error.code {
        case .invalidUserID:
            return .error(400, "invalid_user_id", error.message)
        case .invalidTime:
            return .error(400, "invalid_time", error.message)
        case .cutoffWouldMoveBackward:
            return .error(409, "cutoff_would_move_backward", error.message) { writer in
                writer.field("current", error.keptCutoff)
            }
        case .unknownDevice:
            return .error(404, "unknown_device", "the user has no device of this id")
        case .noDevices:
            return .error(409, "no_device_store", error.message)
        case .readOnlyStore:
            // The store's message says where cutoffs are changed instead (the RP's own table, the JSON file); it
            // names a table or a file, never a secret, and this listener is authenticated.
            return .error(409, "read_only_store", error.message)
        case .invalidStoreConfiguration where writing:
            // Not 503: retrying cannot help until the deployment is fixed, and the store is not down (it serves the
            // reads that keep cutoffs enforced). The message names the `GRANT` or the file to fix, as `tokengate
            // revoke` prints it; no secret, and this listener is authenticated.
            return .error(500, Self.storeWriteRefused, error.message)
        default:
            return .error(503, "store_unavailable", "the cutoff store is unavailable; the last snapshot stays in force")
        }
    }
}
