//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// One of the real web frameworks' small applications under scripts/frameworks/, run as a child process: it
/// logs users in and reads cookies back with the framework's own session code (one JSON request on stdin, one
/// JSON answer on stdout). Shared by the session-cookie format tests and the gateway's end-to-end tests.
public struct FrameworkScript: Sendable, CustomStringConvertible {
    public let name: String
    /// The program and its first arguments (the script).
    public let command: [String]
    /// A command that succeeds when the framework is installed.
    public let probe: [String]
    /// Extra members of every request (Rails' key generator, expiry).
    public let options: [String: String]

    public var description: String { self.name }

    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func script(_ name: String) -> String {
        Self.packageRoot.appendingPathComponent("scripts/frameworks/\(name)").path
    }

    /// Debian installs Node modules there, outside node's default search path.
    static let nodeEnvironment = "NODE_PATH=/usr/share/nodejs"
    static let railsProbe = ["ruby", "-e", "require 'action_controller/railtie'"]

    /// Debian's Rails 6.1 cookie store with its own key generator (PBKDF2-HMAC-SHA1).
    public static let rails61 = FrameworkScript(
        name: "Rails 6.1", command: ["ruby", script("rails_app.rb")], probe: railsProbe, options: ["kdf": "SHA1"])
    /// Rails 6.1's cookie store with Rails 7.0's key generator (PBKDF2-HMAC-SHA256), and `expire_after: 3600`.
    public static let rails70 = FrameworkScript(
        name: "Rails 7.0 keys", command: ["ruby", script("rails_app.rb")], probe: railsProbe,
        options: ["kdf": "SHA256", "expire_after": "3600"])
    public static let flask = FrameworkScript(
        name: "Flask", command: ["python3", script("flask_app.py")], probe: ["python3", "-c", "import flask, flask_login"],
        options: [:])
    public static let django = FrameworkScript(
        name: "Django", command: ["python3", script("django_app.py")], probe: ["python3", "-c", "import django"],
        options: [:])
    public static let express = FrameworkScript(
        name: "Express cookie-session", command: [nodeEnvironment, "node", script("express_app.js")],
        probe: [nodeEnvironment, "node", "-e", "require('express'); require('cookies'); require('keygrip')"],
        options: [:])

    /// Whether the framework can be run here.
    public var isInstalled: Bool {
        (try? ChildProcess.run("/usr/bin/env", self.probe).status) == 0
    }

    /// Runs `ops` in one process with `secret`; the answers, one per op.
    public func run(secret: String, ops: [[String: Any]]) throws -> [[String: Any]] {
        var request: [String: Any] = ["secret": secret, "ops": ops]
        for (key, value) in self.options { request[key] = Int(value) ?? value as Any }
        let input = try JSONSerialization.data(withJSONObject: request)
        let result = try ChildProcess.run("/usr/bin/env", self.command, input: input)
        guard result.status == 0, let data = result.stdout.data(using: .utf8),
            let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let results = answer["results"] as? [[String: Any]]
        else {
            throw FrameworkScriptFailure(message: "\(self.name) failed (\(result.status)): \(result.stderr.suffix(2000))")
        }
        return results
    }
}

public struct FrameworkScriptFailure: Error, CustomStringConvertible {
    public let message: String
    public var description: String { self.message }
}
