//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOHTTP1
import TokengateHTTP
import TokengateTokens

@testable import TokengateGateway

/// The responder's entry points with one clock, in seconds, for the tests that do not look at the confirmation
/// page's minimum delay: its milliseconds are the second's start (`now * 1000`), so a click in the same second
/// as the page is too soon, and one a second later is not.
extension TokenPageResponder {
    func respond(to head: HTTPRequestHead, cutoffs: CutoffSnapshot, now: Int64) -> TokenPageAction {
        self.respond(to: head, cutoffs: cutoffs, now: now, nowMilliseconds: now * 1000)
    }

    func respond(to head: HTTPRequestHead, whoami: TokenPageWhoamiResult, now: Int64) -> TokenPageAnswer {
        self.respond(to: head, whoami: whoami, now: now, nowMilliseconds: now * 1000)
    }

    func confirm(head: HTTPRequestHead, body: [UInt8], cutoffs: CutoffSnapshot, now: Int64) -> TokenPageAction {
        self.confirm(head: head, body: body, cutoffs: cutoffs, now: now, nowMilliseconds: now * 1000)
    }

    func confirm(head: HTTPRequestHead, body: [UInt8], whoami: TokenPageWhoamiResult, now: Int64) -> TokenPageAnswer {
        self.confirm(head: head, body: body, whoami: whoami, now: now, nowMilliseconds: now * 1000)
    }
}

extension RedeemedCodeMemory {
    /// A memory of redeemed codes of the test's own (the gateway keeps one for the process).
    static func forTest(capacity: Int = RedeemedCodes.defaultCapacity) -> RedeemedCodeMemory {
        RedeemedCodeMemory(capacity: capacity, logger: Logger(label: "test"))
    }
}
