//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP
import TokengateTokens

/// A request to the connected-apps page, read and checked: its `GET` (the page, with the notice of the change
/// just made) or its `POST` (a button: `action=revoke&device=ID` or `action=disable_mobile_apps`, with
/// `confirmation=<value>`).
///
/// Each field at most once (which of two devices would be meant?); fields the page does not make are ignored.
/// The body is at most ``maximumBody`` bytes (the gateway stops reading there).
struct ConnectedAppsRequest: Sendable, Equatable {
    static let maximumBody = 1024
    static let maximumQueryLength = 256

    /// A `POST`'s parts: the change asked for and the value, not checked yet.
    var change: ConnectedAppsChange
    var confirmation: String

    /// Why a body is not a button of the page. The descriptions are fixed texts.
    enum Refusal: Error, Sendable, Equatable {
        case malformed(String)

        var description: String {
            switch self {
            case .malformed(let problem): problem
            }
        }
    }

    static func parse(body: [UInt8]) -> Result<Self, Refusal> {
        var fields: [String: String] = [:]
        for pair in FormURLEncoded.pairs(body) where ["action", "device", "confirmation"].contains(pair.name) {
            guard fields[pair.name] == nil else { return .failure(.malformed("\(pair.name) is given twice")) }
            guard let value = FormURLEncoded.decode(pair.rawValue) else {
                return .failure(.malformed("\(pair.name) is not URL-encoded"))
            }
            fields[pair.name] = value
        }
        guard let confirmation = fields["confirmation"], !confirmation.isEmpty else {
            return .failure(.malformed("confirmation is missing"))
        }
        switch fields["action"] {
        case "revoke":
            guard let text = fields["device"], let device = DeviceID(text) else {
                return .failure(.malformed("device must be a device id"))
            }
            return .success(ConnectedAppsRequest(change: .revoke(device), confirmation: confirmation))
        case "disable_mobile_apps":
            guard fields["device"] == nil else { return .failure(.malformed("disable_mobile_apps takes no device")) }
            return .success(ConnectedAppsRequest(change: .disableMobileApps, confirmation: confirmation))
        default:
            return .failure(.malformed("action must be revoke or disable_mobile_apps"))
        }
    }

    /// The notice a `GET` shows (`?done=…`, set by the redirect after a button): one of the page's fixed codes,
    /// or nil for anything else (never text from the query).
    static func notice(target: String) -> Notice? {
        guard let mark = target.firstIndex(of: "?") else { return nil }
        let query = target[target.index(after: mark)...]
        guard query.utf8.count <= Self.maximumQueryLength else { return nil }
        let values = FormURLEncoded.values(named: "done", in: Array(query.utf8))
        guard values.count == 1, let value = values[0] else { return nil }
        return Notice(rawValue: value)
    }

    /// What the page says first after a button was pressed.
    enum Notice: String, Sendable, Equatable {
        case revoked
        case disabled
        case tooSoon = "too_soon"
        case expired

        var text: String {
            switch self {
            case .revoked: "The device was signed out. Its app asks you to sign in again the next time it is used."
            case .disabled: "All mobile apps were signed out. Each asks you to sign in again the next time it is used."
            case .tooSoon: "Your click came too soon after this page appeared, so it did not count. Read the page, then press the button again."
            case .expired: "The page had been open too long, so the click did not count. Press the button again."
            }
        }
    }
}
