//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateTokens

/// What a button on the connected-apps page asks for, for the logged-in user only.
enum ConnectedAppsChange: Sendable, Equatable {
    /// Revoke this one device: every token of it is refused (`device_revoked`).
    case revoke(DeviceID)
    /// "Disable mobile apps": every api token of the user issued until now is refused; browser sessions stay.
    case disableMobileApps

    /// The form's `action` value, which the confirmation value is bound to (``TokengateTokens/TokenPageConfirmation/state``):
    /// a value taken from one button does not work for another.
    var binding: String {
        switch self {
        case .revoke(let device): "revoke:" + device.text
        case .disableMobileApps: "disable_mobile_apps"
        }
    }
}

/// What the store did with a ``ConnectedAppsChange``.
enum ConnectedAppsChangeOutcome: Sendable, Equatable {
    case done
    /// The user has no such device (an id from another account is not found either).
    case unknownDevice
    /// The store could not be written: nothing changed, or it is not known whether it did.
    case failed
}
