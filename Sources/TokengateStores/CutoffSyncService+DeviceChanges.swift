//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

public import TokengateTokens

extension CutoffSyncService {
    /// The connected-apps page's operations (``TokengateTokens/DeviceChanges``) through this service: the same
    /// writes as the admin API's device revocation and `tokengate revoke --api-only`, stored and published in the
    /// snapshot before they return, so the request after the page's answer is already refused.
    public nonisolated var deviceChanges: DeviceChanges {
        DeviceChanges(
            list: { user in try await self.devices(user: user) },
            revoke: { user, device in
                do {
                    return try await self.revokeDevice(user: user, device: device).revocation.record
                } catch let error as CutoffStoreError where error.code == .unknownDevice {
                    return nil
                }
            },
            disableMobileApps: { user in try await self.disableMobileApps(user: user) }
        )
    }
}
