//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateSessionCookies
import TokengateTestSupport

/// A real framework's application (``FrameworkScript``) with how tokengate is configured to read its cookie.
struct FrameworkApp: Sendable, CustomStringConvertible {
    let script: FrameworkScript
    let format: SessionCookieFormat
    let fields: SessionCookieFields

    var name: String { self.script.name }
    var description: String { self.name }
    var isInstalled: Bool { self.script.isInstalled }

    func run(secret: String, ops: [[String: Any]]) throws -> [[String: Any]] {
        try self.script.run(secret: secret, ops: ops)
    }

    /// `user_id`, `login_at` and `api_only` as the Rails application stores them.
    static let railsFields = SessionCookieFields(
        userID: SessionJSONPointer("/user_id")!, loginTime: SessionJSONPointer("/login_at")!,
        apiOnly: SessionJSONPointer("/api_only")!)

    static let rails61 = FrameworkApp(
        script: .rails61, format: .rails(RailsCookieOptions(version: .v6_1, cookieName: "_app_session")),
        fields: railsFields)
    static let rails70 = FrameworkApp(
        script: .rails70, format: .rails(RailsCookieOptions(version: .v7_0, cookieName: "_app_session")),
        fields: railsFields)
    static let flask = FrameworkApp(
        script: .flask, format: .flask(FlaskSessionOptions()),
        fields: SessionCookieFields(
            userID: SessionJSONPointer("/_user_id")!, loginTime: SessionJSONPointer("/login_at")!,
            apiOnly: SessionJSONPointer("/api_only")!))
    static let django = FrameworkApp(
        script: .django, format: .django(DjangoSessionOptions()),
        fields: SessionCookieFields(
            userID: SessionJSONPointer("/_auth_user_id")!, loginTime: SessionJSONPointer("/login_at")!,
            apiOnly: SessionJSONPointer("/api_only")!))
    static let express = FrameworkApp(
        script: .express, format: .cookieSession(CookieSessionOptions()),
        fields: SessionCookieFields(
            userID: SessionJSONPointer("/passport/user")!, loginTime: SessionJSONPointer("/login_at")!,
            apiOnly: SessionJSONPointer("/api_only")!))

    static let all = [rails61, rails70, flask, django, express]
}
