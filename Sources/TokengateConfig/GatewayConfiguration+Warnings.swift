//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

extension GatewayConfiguration {
    /// Valid configurations that are probably not what their author meant, in words for `check-config` and
    /// the startup log.
    ///
    /// A request whose `Host` matches no host-bound route falls through to the routes without a host. So a
    /// public route without a host (`accept: none`) that forwards to the same upstream as a token-protected
    /// route bound to a host lets anyone reach that backend without a token, by sending another `Host` — the
    /// backend sees the same path either way. Giving the public route a host, or its own upstream, closes it.
    public var warnings: [String] {
        var warnings: [String] = []
        for (publicIndex, publicRoute) in self.routes.enumerated()
        where publicRoute.host == nil && publicRoute.tokenPage == nil && !publicRoute.accept.acceptsTokens {
            guard let upstream = publicRoute.upstream else { continue }
            let shadowed = self.routes.enumerated().filter { _, route in
                route.host != nil && route.upstream == upstream && route.accept.acceptsTokens
                    && route.pathPrefix.hasPrefix(publicRoute.pathPrefix)
            }
            guard let (protectedIndex, protected) = shadowed.first else { continue }
            warnings.append(
                "routes[\(publicIndex)] (path_prefix \(publicRoute.pathPrefix), any host, no token) forwards to upstream "
                    + "'\(upstream)', which routes[\(protectedIndex)] (host \(protected.host ?? ""), path_prefix "
                    + "\(protected.pathPrefix)) protects with a token: a request with any other Host reaches that "
                    + "backend without one. Give routes[\(publicIndex)] a host, or an upstream of its own."
            )
        }
        return warnings
    }
}
