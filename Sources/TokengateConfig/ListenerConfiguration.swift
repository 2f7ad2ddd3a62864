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
    /// The peers that must open each connection with a PROXY protocol header (v1 or v2), whose address then
    /// is the client's (`proxy_protocol.from`); `nil` when the listener takes none. A peer outside the list is
    /// served as a client itself, and a PROXY header it sends is never read as one.
    public var proxyProtocolFrom: [CIDR]?
    /// Which client addresses may use the listener's routes (`ip_rules`), judged per request.
    public var ipRules: IPRules

    public init(
        address: SocketAddressSpec,
        mode: ListenerMode,
        redirectPort: Int? = nil,
        proxyProtocolFrom: [CIDR]? = nil,
        ipRules: IPRules = IPRules()
    ) {
        self.address = address
        self.mode = mode
        self.redirectPort = redirectPort
        self.proxyProtocolFrom = proxyProtocolFrom
        self.ipRules = ipRules
    }

    /// The TLS settings, when this is a public TLS listener (not a `forward_auth` one, whose own are in
    /// ``forwardAuth``).
    public var tls: TLSListenerConfiguration? {
        switch self.mode {
        case .tls(let tls): tls
        case .plain, .forwardAuth: nil
        }
    }

    /// The check endpoint's settings, when this is a `forward_auth` listener.
    public var forwardAuth: ForwardAuthConfiguration? {
        if case .forwardAuth(let settings) = self.mode { settings } else { nil }
    }
}

/// What a listener speaks.
public enum ListenerMode: Sendable, Equatable {
    /// TLS, and HTTP inside it. The only mode that forwards requests.
    case tls(TLSListenerConfiguration)
    /// Plain HTTP that never forwards (DESIGN §4).
    case plain(PlainHTTPMode)
    /// The check endpoint for a front proxy (``ForwardAuthConfiguration``): answers, never forwards.
    case forwardAuth(ForwardAuthConfiguration)
}

/// What a plain-HTTP listener answers. It never forwards a request, whatever the mode.
public enum PlainHTTPMode: String, Sendable, Equatable, CaseIterable {
    /// 426 Upgrade Required with a JSON error body.
    case reject
    /// 308 Permanent Redirect to the same URL over https.
    case redirect
}
