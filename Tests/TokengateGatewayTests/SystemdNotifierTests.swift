//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Glibc
import Testing
import TokengateGateway

/// What `$NOTIFY_SOCKET` and `$WATCHDOG_USEC`/`$WATCHDOG_PID` may say, and a datagram through a real socket
/// (the whole gateway's messages: ServeCommandTests).
@Suite struct SystemdNotifierTests {
    @Test func onlyAnAbsolutePathOrAnAbstractNameIsASocket() {
        #expect(SystemdNotifier(socket: nil) == nil)
        #expect(SystemdNotifier(socket: "") == nil)
        #expect(SystemdNotifier(socket: "run/notify") == nil, "relative")
        #expect(SystemdNotifier(socket: "vsock:2:1234") == nil, "not a unix socket")
        #expect(SystemdNotifier(socket: "/" + String(repeating: "a", count: 200)) == nil, "longer than sun_path")
        #expect(SystemdNotifier(socket: "/run/systemd/notify") != nil)
        #expect(SystemdNotifier(socket: "@tokengate") != nil)
    }

    @Test func aMessageReachesAPathAndAnAbstractSocket() throws {
        let directory = NSTemporaryDirectory() + "notify-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for address in [directory + "/socket", "@tokengate-test-" + UUID().uuidString.prefix(8)] {
            let socket = try NotifySocket(address: address)
            let notifier = try #require(SystemdNotifier(socket: address))
            #expect(notifier.notify("STATUS=one\nREADY=1"))
            #expect(socket.receive(timeout: 5) == "STATUS=one\nREADY=1", "\(address)")
        }
        // Nobody listening: the send fails, and that is all (the gateway serves whether systemd listens or not).
        #expect(SystemdNotifier(socket: directory + "/nobody")?.notify("READY=1") == false)
    }

    /// Half of `$WATCHDOG_USEC`, for this process only: a `$WATCHDOG_PID` naming another process (a parent that
    /// exec'd the gateway without clearing it) turns the pings off.
    @Test func theWatchdogIntervalIsHalfTheTimeoutForTheProcessItNames() {
        #expect(SystemdNotifier.watchdogInterval(usec: "200000", pid: nil) == .milliseconds(100))
        #expect(SystemdNotifier.watchdogInterval(usec: "200000", pid: String(getpid())) == .milliseconds(100))
        #expect(SystemdNotifier.watchdogInterval(usec: "200000", pid: String(getpid() + 1)) == nil)
        #expect(SystemdNotifier.watchdogInterval(usec: "0", pid: nil) == nil)
        #expect(SystemdNotifier.watchdogInterval(usec: "soon", pid: nil) == nil)
        #expect(SystemdNotifier.watchdogInterval(usec: nil, pid: nil) == nil)
    }
}
