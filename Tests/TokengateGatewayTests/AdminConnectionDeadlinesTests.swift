//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import Testing
import TokengateAdmin

@testable import TokengateGateway

/// The admin connection's phases as a value, without a channel or a clock: which deadline each event arms, and
/// when a request may be served.
@Suite struct AdminConnectionDeadlinesTests {
    private func deadlines() -> AdminConnectionDeadlines {
        AdminConnectionDeadlines(requestTimeout: .seconds(5), idleTimeout: .seconds(10))
    }

    @Test func aRequestIsReceivedServedAndAnsweredThenTheConnectionWaitsForTheNext() {
        var machine = self.deadlines()
        #expect(machine.start() == .arm(.seconds(5), markWaiting: false))
        #expect(machine.start() == .none, "started once")
        #expect(machine.bytesArrived(100) == .none, "bytes of the request under way change no deadline")
        #expect(machine.requestReceived() == .serve)
        #expect(machine.phase == .serving)
        #expect(machine.bytesArrived(10) == .none, "no deadline while served: a pipelined request waits its turn")
        #expect(machine.answered(closing: false) == .arm(.seconds(10), markWaiting: true))
        #expect(machine.phase == .idle)
        #expect(machine.bytesArrived(0) == .none, "an empty read (a TLS record without data) begins nothing")
        #expect(machine.bytesArrived(1) == .arm(.seconds(5), markWaiting: true))
        #expect(machine.phase == .receiving)
        #expect(machine.requestReceived() == .serve)
    }

    @Test func aHeadHeldBackByThePipelineBeginsARequestOnAnIdleConnection() {
        var machine = self.deadlines()
        _ = machine.start()
        _ = machine.requestReceived()
        _ = machine.answered(closing: false)
        #expect(machine.headArrived() == .arm(.seconds(5), markWaiting: true))
        #expect(machine.headArrived() == .none, "the request is under way already")
    }

    @Test func aClosingConnectionServesNothingMore() {
        var machine = self.deadlines()
        _ = machine.start()
        _ = machine.requestReceived()
        #expect(machine.answered(closing: true) == .arm(.seconds(10), markWaiting: true))
        #expect(machine.phase == .closing)
        #expect(machine.bytesArrived(10) == .none)
        #expect(machine.headArrived() == .none)
        #expect(machine.requestReceived() == .refuse)
        #expect(machine.answered(closing: false) == .none)
    }

    @Test func nothingIsServedBeforeTheStartOrAfterTheStop() {
        var early = self.deadlines()
        #expect(early.requestReceived() == .refuse)
        var machine = self.deadlines()
        _ = machine.start()
        #expect(machine.stop() == .stop)
        #expect(machine.requestReceived() == .refuse)
        #expect(machine.bytesArrived(10) == .none)
        #expect(machine.answered(closing: false) == .none)
        #expect(machine.start() == .none)
    }
}
