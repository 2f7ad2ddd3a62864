//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Yams

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `TOKENGATE_…` environment variables that replace values of the configuration file: what a container image or
/// an orchestrator sets per deployment (addresses, the log level, where the cutoff store is, the files a secret is
/// mounted at), so that one file serves every environment.
///
/// The values are put into the YAML tree before it is decoded, so they pass exactly the checks a value written in
/// the file passes (an admin address off loopback still needs `secret_file`), and a problem in one names the
/// variable. They are read at every load, reloads included: a reload never drops them. An empty variable counts as
/// unset. Secrets are never taken from the environment itself (a process's environment is readable in /proc by its
/// user and ends up in crash reports): the variables name the files that hold them.
///
/// Listed with their keys in docs/configuration.md ("Environment variables").
public struct EnvironmentOverrides: Sendable, Equatable {
    /// Every variable read, with the key it sets.
    public static let variables: [(name: String, key: String)] = [
        ("TOKENGATE_LISTEN", "listen[].address"),
        ("TOKENGATE_ADMIN_ADDRESS", "admin.address"),
        ("TOKENGATE_ADMIN_SECRET_FILE", "admin.secret_file"),
        ("TOKENGATE_LOG_LEVEL", "log.level"),
        ("TOKENGATE_CUTOFFS_SQLITE", "cutoffs.sqlite"),
        ("TOKENGATE_CUTOFFS_FILE", "cutoffs.file"),
        ("TOKENGATE_CUTOFFS_POSTGRES", "cutoffs.postgres"),
        ("TOKENGATE_CUTOFFS_PASSWORD_FILE", "cutoffs.password_file"),
        ("TOKENGATE_SIGNING_KEY_FILE", "signing_key.jwks, .pem or .hmac_file"),
    ]

    static let storeKeys = ["sqlite", "file", "postgres"]

    /// The variables that are set and not empty, by name.
    public var values: [String: String]

    public init(_ values: [String: String]) {
        self.values = values.filter { name, value in
            !value.isEmpty && Self.variables.contains { $0.name == name }
        }
    }

    /// The variables of this process's environment.
    public static func fromProcess() -> EnvironmentOverrides {
        var values: [String: String] = [:]
        for variable in Self.variables {
            if let value = getenv(variable.name) {
                values[variable.name] = String(cString: value)
            }
        }
        return EnvironmentOverrides(values)
    }

    /// No overrides: the file as written (what tests and tools that judge a file away from its deployment use).
    public static let none = EnvironmentOverrides([:])

    /// The tree with the overrides applied, and the key path each one set with the variable that set it (for
    /// messages). A variable that cannot be applied to this file's shape is a problem of its own.
    func apply(to root: Node, file: String) throws(ConfigurationError) -> (Node, [String: String]) {
        guard !self.values.isEmpty else {
            return (root, [:])
        }
        guard case .mapping(var top) = root else {
            // The decoder reports a top level that is not a mapping.
            return (root, [:])
        }
        var setBy: [String: String] = [:]
        func problem(_ name: String, _ message: String) -> ConfigurationError {
            ConfigurationError(code: .conflict, file: file, keyPath: name, message: message)
        }

        if let text = self.values["TOKENGATE_LISTEN"] {
            let addresses = text.split(separator: ",", omittingEmptySubsequences: false).map {
                String($0).trimmingASCIISpaces()
            }
            guard case .sequence(var listeners)? = Self.value(top, "listen") else {
                throw problem("TOKENGATE_LISTEN", "the configuration has no listen list whose addresses it could set")
            }
            guard addresses.count == listeners.count, !addresses.contains(where: \.isEmpty) else {
                throw problem(
                    "TOKENGATE_LISTEN",
                    "expected \(listeners.count) comma-separated address\(listeners.count == 1 ? "" : "es"), one per "
                        + "listener of the file in its order, got \(addresses.count)"
                )
            }
            for index in listeners.indices {
                guard case .mapping(var listener) = listeners[index] else {
                    continue  // the decoder reports it
                }
                Self.set(&listener, "address", addresses[index])
                listeners[index] = .mapping(listener)
                setBy["listen[\(index)].address"] = "TOKENGATE_LISTEN"
            }
            Self.set(&top, "listen", .sequence(listeners))
        }

        if self.values["TOKENGATE_ADMIN_ADDRESS"] != nil || self.values["TOKENGATE_ADMIN_SECRET_FILE"] != nil {
            var admin: Node.Mapping
            switch Self.value(top, "admin") {
            case .mapping(let existing)?: admin = existing
            case nil: admin = Node.Mapping([])
            case .some(let other) where other.scalar.map({ $0.string.isEmpty || $0.string == "~" || $0.string == "null" }) == true:
                admin = Node.Mapping([])
            case .some:
                throw problem("TOKENGATE_ADMIN_ADDRESS", "the configuration's admin is not a mapping")
            }
            if let address = self.values["TOKENGATE_ADMIN_ADDRESS"] {
                Self.set(&admin, "address", address)
                setBy["admin.address"] = "TOKENGATE_ADMIN_ADDRESS"
            }
            if let secretFile = self.values["TOKENGATE_ADMIN_SECRET_FILE"] {
                Self.set(&admin, "secret_file", secretFile)
                setBy["admin.secret_file"] = "TOKENGATE_ADMIN_SECRET_FILE"
            }
            Self.set(&top, "admin", .mapping(admin))
        }

        if let level = self.values["TOKENGATE_LOG_LEVEL"] {
            var log = Self.mapping(top, "log") ?? Node.Mapping([])
            Self.set(&log, "level", level)
            Self.set(&top, "log", .mapping(log))
            setBy["log.level"] = "TOKENGATE_LOG_LEVEL"
        }

        let stores = Self.storeKeys.filter { self.values["TOKENGATE_CUTOFFS_\($0.uppercased())"] != nil }
        if stores.count > 1 {
            throw problem(
                "TOKENGATE_CUTOFFS_\(stores[1].uppercased())",
                "set one of TOKENGATE_CUTOFFS_SQLITE, TOKENGATE_CUTOFFS_FILE and TOKENGATE_CUTOFFS_POSTGRES"
            )
        }
        if let store = stores.first, let location = self.values["TOKENGATE_CUTOFFS_\(store.uppercased())"] {
            var cutoffs = Self.mapping(top, "cutoffs") ?? Node.Mapping([])
            // The store named replaces the file's: a sqlite store's file set for a deployment whose file names
            // PostgreSQL drops the PostgreSQL settings with it (they would be refused as "only for the postgres
            // store"); a PostgreSQL URL keeps them (a password file, a table).
            var pairs = cutoffs.filter { pair in !Self.storeKeys.contains(pair.key.scalar?.string ?? "") }
            if store != "postgres" {
                pairs = pairs.filter { !ConfigurationDecoder.postgresOnlyKeys.contains($0.key.scalar?.string ?? "") }
            }
            cutoffs = Node.Mapping(pairs.map { ($0.key, $0.value) }, cutoffs.tag, cutoffs.style, cutoffs.mark)
            Self.set(&cutoffs, store, location)
            Self.set(&top, "cutoffs", .mapping(cutoffs))
            setBy["cutoffs.\(store)"] = "TOKENGATE_CUTOFFS_\(store.uppercased())"
        }
        if let passwordFile = self.values["TOKENGATE_CUTOFFS_PASSWORD_FILE"] {
            guard var cutoffs = Self.mapping(top, "cutoffs"), cutoffs.contains(where: { $0.key.scalar?.string == "postgres" })
            else {
                throw problem("TOKENGATE_CUTOFFS_PASSWORD_FILE", "only for the postgres store")
            }
            Self.set(&cutoffs, "password_file", passwordFile)
            Self.set(&top, "cutoffs", .mapping(cutoffs))
            setBy["cutoffs.password_file"] = "TOKENGATE_CUTOFFS_PASSWORD_FILE"
        }

        if let keyFile = self.values["TOKENGATE_SIGNING_KEY_FILE"] {
            var signingKey = Self.mapping(top, "signing_key") ?? Node.Mapping([])
            let present = Set(signingKey.compactMap { $0.key.scalar?.string })
            guard let fileKey = ["jwks", "pem", "hmac_file"].first(where: { present.contains($0) }) else {
                throw problem(
                    "TOKENGATE_SIGNING_KEY_FILE",
                    "the configuration has no signing_key with jwks, pem or hmac_file whose file it could set"
                )
            }
            Self.set(&signingKey, fileKey, keyFile)
            Self.set(&top, "signing_key", .mapping(signingKey))
            setBy["signing_key.\(fileKey)"] = "TOKENGATE_SIGNING_KEY_FILE"
        }
        return (.mapping(top), setBy)
    }

    private static func value(_ mapping: Node.Mapping, _ key: String) -> Node? {
        mapping.filter { $0.key.scalar?.string == key }.last?.value
    }

    private static func mapping(_ mapping: Node.Mapping, _ key: String) -> Node.Mapping? {
        if case .mapping(let found)? = self.value(mapping, key) {
            return found
        }
        return nil
    }

    private static func set(_ mapping: inout Node.Mapping, _ key: String, _ text: String) {
        // Quoted, so that no value is read as YAML (a null, a number).
        self.set(&mapping, key, .scalar(Node.Scalar(text, .implicit, .doubleQuoted)))
    }

    private static func set(_ mapping: inout Node.Mapping, _ key: String, _ value: Node) {
        var pairs = mapping.map { ($0.key, $0.value) }
        if let index = pairs.lastIndex(where: { $0.0.scalar?.string == key }) {
            pairs[index].1 = value
        } else {
            pairs.append((.scalar(Node.Scalar(key)), value))
        }
        mapping = Node.Mapping(pairs, mapping.tag, mapping.style, mapping.mark)
    }
}

extension String {
    fileprivate func trimmingASCIISpaces() -> String {
        var scalars = Substring(self)
        while scalars.first == " " || scalars.first == "\t" { scalars = scalars.dropFirst() }
        while scalars.last == " " || scalars.last == "\t" { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
