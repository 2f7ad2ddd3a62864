//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateConfig
import TokengateGateway

extension AdminServer {
    /// What `serve` reads for the admin listener, checked without binding: its secret file (``loadSecret(_:)``,
    /// the same reader) and its certificates. For `tokengate check-config`, beside `GatewayServer.check(_:)`.
    public static func check(_ configuration: GatewayConfiguration) throws {
        guard let admin = configuration.admin else { return }
        if let secretFile = admin.secretFile {
            _ = try Self.loadSecret(secretFile)
        }
        if let tls = admin.tls {
            _ = try Self.makeTLSContext(tls)  // Throws naming the setting (`admin.tls.certificates[0].key: …`).
        }
    }
}
