//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The admin listener (cutoff writes, health, metrics, reload).
///
/// On a non-loopback address it must have a bearer secret file (and TLS where the network is not trusted);
/// that is checked at load.
public struct AdminConfiguration: Sendable, Equatable {
    public var address: SocketAddressSpec
    /// A file holding the bearer secret admin requests must present. Only its existence is checked here.
    public var secretFile: ConfigPath?
    public var tls: TLSListenerConfiguration?

    public init(address: SocketAddressSpec, secretFile: ConfigPath? = nil, tls: TLSListenerConfiguration? = nil) {
        self.address = address
        self.secretFile = secretFile
        self.tls = tls
    }
}
