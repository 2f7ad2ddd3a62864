//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

// MARK: The cutoff store

extension ConfigurationDecoder {
    static let postgresOnlyKeys = [
        "password_file", "table", "channel", "resync_interval", "stale_after", "cache_file", "rp_table",
    ]

    func cutoffs(_ node: ConfigNode) throws(ConfigurationError) -> CutoffStoreConfiguration {
        let map = try node.mapping(allowed: ["file", "sqlite", "postgres"] + Self.postgresOnlyKeys)
        let stores = map.present(among: ["file", "sqlite", "postgres"])
        guard stores.count == 1, let store = stores.first, let storeNode = map[store] else {
            if stores.isEmpty {
                throw node.error(.missingKey, "cutoffs needs exactly one store: file, sqlite or postgres")
            }
            throw map.keyNode(stores[1]).error(.conflict, "cutoffs has exactly one store: file, sqlite or postgres")
        }
        if store != "postgres", let extra = Self.postgresOnlyKeys.first(where: { map.has($0) }) {
            throw map.keyNode(extra).error(.conflict, "only for the postgres store")
        }
        switch store {
        case "file":
            // Read-only: the gateway never writes it (revocations go to a writable store), so it must exist.
            return .file(try storeNode.path(mustExist: true))
        case "sqlite":
            return .sqlite(try storeNode.creatablePath())
        default:
            return .postgres(try self.postgres(storeNode, map: map))
        }
    }

    private func postgres(_ urlNode: ConfigNode, map: ConfigMapping) throws(ConfigurationError)
        -> PostgresStoreConfiguration
    {
        let url = try urlNode.string(maximumLength: 2048)
        var store: PostgresStoreConfiguration
        do {
            store = try Self.parsePostgresURL(url)
        } catch {
            throw urlNode.error(error)
        }
        store.passwordFile = try map["password_file"]?.path(mustExist: true)
        store.table = try self.sqlIdentifier(map["table"], qualified: true) ?? store.table
        store.notifyChannel = try self.sqlIdentifier(map["channel"], qualified: false) ?? store.notifyChannel
        store.resyncInterval =
            try map["resync_interval"]?.duration(in: .seconds(1)...(.seconds(86_400)))
            ?? store.resyncInterval
        store.staleAfter =
            try map["stale_after"]?.duration(in: .seconds(1)...(.seconds(7 * 86_400)))
            ?? store.staleAfter
        store.cacheFile = try map["cache_file"]?.creatablePath()
        if let rpNode = map["rp_table"] {
            let rp = try rpNode.mapping(allowed: [
                "table", "user_column", "password_changed_column", "api_disabled_column", "change_column",
            ])
            store.rpTable = RPTableConfiguration(
                table: try self.sqlIdentifier(try rp.required("table"), qualified: true)!,
                userColumn: try self.sqlIdentifier(try rp.required("user_column"), qualified: false)!,
                passwordChangedColumn: try self.sqlIdentifier(
                    try rp.required("password_changed_column"),
                    qualified: false
                )!,
                apiDisabledColumn: try self.sqlIdentifier(rp["api_disabled_column"], qualified: false),
                changeColumn: try self.sqlIdentifier(rp["change_column"], qualified: false)
            )
        }
        return store
    }

    private func sqlIdentifier(_ node: ConfigNode?, qualified: Bool) throws(ConfigurationError) -> String? {
        guard let node else {
            return nil
        }
        let text = try node.string(maximumLength: 127)
        guard ValueSyntax.isSQLIdentifier(text, qualified: qualified) else {
            throw node.error(
                .invalidValue,
                qualified
                    ? "expected an SQL name such as users or app.users (letters, digits, _), got \(node.summary)"
                    : "expected an SQL name (letters, digits, _), got \(node.summary)"
            )
        }
        return text
    }

    /// Parses `postgres://user@host[:port]/database[?sslmode=…]`.
    ///
    /// Messages never include the URL, because a mistyped one may hold a password; a URL that does hold one is
    /// refused, so the configuration file never has to be treated as a secret.
    static func parsePostgresURL(_ url: String) throws(ValueSyntaxError) -> PostgresStoreConfiguration {
        let form = "expected postgres://USER@HOST[:PORT]/DATABASE[?sslmode=disable|require|verify-full]"
        var rest: Substring
        if url.hasPrefix("postgres://") {
            rest = url.dropFirst("postgres://".count)
        } else if url.hasPrefix("postgresql://") {
            rest = url.dropFirst("postgresql://".count)
        } else {
            throw ValueSyntaxError(form)
        }
        guard let at = rest.firstIndex(of: "@"), let slash = rest.firstIndex(of: "/"), at < slash else {
            throw ValueSyntaxError("\(form) (the user is required)")
        }
        let userInfo = rest[..<at]
        if userInfo.contains(":") {
            throw ValueSyntaxError(
                "the URL must not contain a password (it would end up in logs and process lists): use password_file"
            )
        }
        func isName(_ text: Substring) -> Bool {
            !text.isEmpty && text.utf8.count <= 63
                && text.utf8.allSatisfy { byte in
                    (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                        || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
                }
        }
        guard isName(userInfo) else {
            throw ValueSyntaxError("the user name may hold letters, digits, _, - and . only")
        }
        let (host, port) = try ValueSyntax.authority(
            rest[rest.index(after: at)..<slash],
            defaultPort: 5432,
            in: "the URL"
        )
        rest = rest[rest.index(after: slash)...]
        var database = rest
        var query: Substring = ""
        if let question = rest.firstIndex(of: "?") {
            database = rest[..<question]
            query = rest[rest.index(after: question)...]
        }
        guard isName(database) else {
            throw ValueSyntaxError("\(form) (the database name may hold letters, digits, _, - and . only)")
        }
        var store = PostgresStoreConfiguration(
            url: url,
            host: host,
            port: port,
            user: String(userInfo),
            database: String(database)
        )
        let loopback = SocketAddressSpec(host: host, port: port).isLoopback
        store.tlsMode = loopback ? .disable : .require
        if !query.isEmpty {
            for parameter in query.split(separator: "&", omittingEmptySubsequences: false) {
                let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, parts[0] == "sslmode" else {
                    throw ValueSyntaxError("the only URL parameter understood is sslmode")
                }
                guard let mode = PostgresTLSMode(rawValue: String(parts[1])) else {
                    throw ValueSyntaxError("sslmode must be disable, require or verify-full")
                }
                store.tlsMode = mode
            }
        }
        return store
    }
}
