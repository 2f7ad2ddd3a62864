//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One public listener: an address and whether it speaks TLS or only refuses plain HTTP.
public struct ListenerConfiguration: Sendable, Equatable {
    public var address: SocketAddressSpec
    public var mode: ListenerMode
    /// For a plain listener in `redirect` mode: the HTTPS port to put in the `Location` header
    /// (`redirect_port`, else the first TLS listener's port). `nil` for every other listener.
    public var redirectPort: Int?

    public init(address: SocketAddressSpec, mode: ListenerMode, redirectPort: Int? = nil) {
        self.address = address
        self.mode = mode
        self.redirectPort = redirectPort
    }

    /// The TLS settings, when this is a TLS listener.
    public var tls: TLSListenerConfiguration? {
        switch self.mode {
        case .tls(let tls): tls
        case .plain: nil
        }
    }
}

/// What a listener speaks.
public enum ListenerMode: Sendable, Equatable {
    /// TLS, and HTTP inside it. The only mode that forwards requests.
    case tls(TLSListenerConfiguration)
    /// Plain HTTP that never forwards (DESIGN §4).
    case plain(PlainHTTPMode)
}

/// What a plain-HTTP listener answers. It never forwards a request, whatever the mode.
public enum PlainHTTPMode: String, Sendable, Equatable, CaseIterable {
    /// 426 Upgrade Required with a JSON error body.
    case reject
    /// 308 Permanent Redirect to the same URL over https.
    case redirect
}
