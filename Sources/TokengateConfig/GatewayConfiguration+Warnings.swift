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
    ///
    /// A file holding a secret (a TLS private key, the signing key, an HMAC secret, the admin secret, the
    /// PostgreSQL password) that other users may read is reported, not refused: Kubernetes mounts secrets
    /// 0644 unless `defaultMode` says otherwise, and a container often runs as the only user. Elsewhere it
    /// usually means the key was written with the default umask. A group that is the gateway's own is not
    /// reported (``FileCheck/permissionsExposingSecret(_:)``). Only the owner, group and mode are looked at,
    /// never the content.
    ///
    /// A token page app with a custom-scheme callback and `confirm: false` is reported: any app on the device can
    /// claim that scheme and open the page with a PKCE challenge of its own, and a browser that is logged in then
    /// hands it a login without asking the user (RFC 8252 §8.6). It may be meant (an app on managed devices only),
    /// so it is allowed, but never silently.
    ///
    /// `misdirected_requests` on a listener with one certificate is reported: every connection gets that
    /// certificate, so there is no other one a request could have been meant for, and the key does nothing.
    public var warnings: [String] {
        var warnings: [String] = self.readableSecretFileWarnings
        warnings += self.unconfirmedCustomSchemeWarnings
        for (index, listener) in self.listeners.enumerated() {
            guard let tls = listener.tls, tls.misdirectedRequestsIsSet, tls.certificates.count == 1 else { continue }
            warnings.append(
                "listen[\(index)].tls.misdirected_requests has no effect: the listener has one certificate, which every "
                    + "connection gets, so requests are served whatever their host (the check needs two or more "
                    + "certificates). Remove the key, or add the certificates it is meant for."
            )
        }
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
        warnings += self.plainSecretHeaderWarnings
        warnings += self.bodyOnlyForwardAuthWarnings
        return warnings
    }

    /// See ``warnings``: a forward-auth check carries the request's fields and never its body, so a route that finds
    /// its token only in the body answers every check with 401 — almost certainly not what the operator meant.
    private var bodyOnlyForwardAuthWarnings: [String] {
        guard let listenerIndex = self.listeners.firstIndex(where: { $0.forwardAuth != nil }) else { return [] }
        return self.routes.enumerated().compactMap { index, route in
            let sources = route.allSources
            guard route.accept.acceptsTokens, !sources.isEmpty, sources.allSatisfy(\.isInBody) else { return nil }
            return "routes[\(index)] finds its token only in the request body (\(sources.map(\.description).joined(separator: ", "))), "
                + "which the forward_auth checks of listen[\(listenerIndex)] never carry: every check for it is refused "
                + "with 401. Add a header or cookie source, or keep the route off the forward-auth proxy"
        }
    }

    /// See ``warnings``: a secret header sent to `http://` targets crosses the network in clear, where anyone who
    /// can read that traffic learns the secret and can then send requests as the gateway.
    private var plainSecretHeaderWarnings: [String] {
        self.upstreams.keys.sorted().compactMap { name in
            let upstream = self.upstreams[name]!
            guard let secret = upstream.secretHeader, upstream.targets.contains(where: { target in
                target.scheme == .http && target.host != "localhost" && target.host != "::1" && !target.host.hasPrefix("127.")
            }) else { return nil }
            return "upstreams.\(name).secret_header: \(secret.name) goes to http:// targets off loopback in clear text: anyone who can "
                + "read that network learns it; use https:// targets (with tls.client_certificate), or keep the backend's "
                + "network private to the gateway"
        }
    }

    /// See ``warnings``: one line per custom-scheme app whose confirmation is turned off.
    private var unconfirmedCustomSchemeWarnings: [String] {
        var warnings: [String] = []
        for (routeIndex, route) in self.routes.enumerated() {
            for (appIndex, app) in (route.tokenPage?.apps ?? []).enumerated() where app.hasCustomScheme && !app.confirm {
                warnings.append(
                    "routes[\(routeIndex)].apps[\(appIndex)] (\(app.name)): confirm is false on the custom-scheme callback "
                        + "\(app.callback): any app on the device can claim that scheme and start a login of its own, which a "
                        + "browser that is already logged in completes without asking the user (RFC 8252 §8.6). Remove "
                        + "confirm: false, or give the app a claimed https:// callback (App Links, Universal Links)."
                )
            }
        }
        return warnings
    }

    /// Every configured file that holds a secret, with where the configuration names it.
    var secretFiles: [(key: String, file: ConfigPath)] {
        var files: [(key: String, file: ConfigPath)] = []
        for (index, listener) in self.listeners.enumerated() {
            for (certificate, pair) in (listener.tls?.certificates ?? []).enumerated() {
                files.append(("listen[\(index)].tls.certificates[\(certificate)].key", pair.key))
            }
        }
        if let admin = self.admin {
            for (certificate, pair) in (admin.tls?.certificates ?? []).enumerated() {
                files.append(("admin.tls.certificates[\(certificate)].key", pair.key))
            }
            if let secretFile = admin.secretFile {
                files.append(("admin.secret_file", secretFile))
            }
        }
        for name in self.upstreams.keys.sorted() {
            let upstream = self.upstreams[name]!
            if let pair = upstream.tls?.clientCertificate {
                files.append(("upstreams.\(name).tls.client_certificate.key", pair.key))
            }
            if let secret = upstream.secretHeader {
                files.append(("upstreams.\(name).secret_header.value_file", secret.valueFile))
            }
        }
        // Verification keys are public, except an HMAC secret, which verifies and signs alike.
        for (index, key) in self.keys.enumerated() {
            if case .hmacFile(let path) = key.source {
                files.append(("keys[\(index)].hmac_file", path))
            }
        }
        switch self.signingKey?.source {
        case .jwks(let path): files.append(("signing_key.jwks", path))
        case .pem(let path): files.append(("signing_key.pem", path))
        case .hmacFile(let path): files.append(("signing_key.hmac_file", path))
        case .hmacEnvironment, .remote, nil: break
        }
        if case .postgres(let postgres) = self.cutoffs, let passwordFile = postgres.passwordFile {
            files.append(("cutoffs.password_file", passwordFile))
        }
        return files
    }

    private var readableSecretFileWarnings: [String] {
        var reported: Set<String> = []
        var warnings: [String] = []
        for (key, file) in self.secretFiles where reported.insert(file.path).inserted {
            if let warning = Self.readableSecretWarning(key: key, file: file) {
                warnings.append(warning)
            }
        }
        return warnings
    }

    /// The warning for a file holding a secret that others may read (see ``warnings``), or `nil`. Public for the
    /// files only their content shows to be secret: a `keys:` JWK Set of HMAC keys, which verify and sign alike.
    public static func readableSecretWarning(key: String, file: ConfigPath) -> String? {
        guard let mode = FileCheck.permissionsExposingSecret(file.path) else { return nil }
        let who = mode & 0o004 != 0 ? "every user on the machine" : "its group, which is not one of the gateway's groups,"
        return "\(key): \(file) holds a secret but has mode \(String(mode, radix: 8).leftPadded(to: 4)), so \(who) can read it; "
            + "make it readable by the gateway only (chmod 600 when the gateway's user owns it, or 640 with the gateway's "
            + "group; defaultMode: 0440 with the pod's fsGroup on a Kubernetes secret volume)"
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        self.count >= width ? self : String(repeating: "0", count: width - self.count) + self
    }
}
