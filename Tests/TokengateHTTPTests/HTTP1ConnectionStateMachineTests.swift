//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import Testing
import TokengateHTTP

/// The HTTP/1.1 connection's transitions, fed as values: bytes, reads, writability, the exchange's completion,
/// timers and shutdown, with the actions each one returns. No channel, no socket, no clock.
struct HTTP1ConnectionStateMachineTests {
    /// An action written as a short string, so that a sequence compares in one expectation.
    private static func describe(_ action: HTTP1ConnectionStateMachine.ReadAction) -> String {
        switch action {
        case .wait: "wait"
        case .startExchange(let head, let number, let close): "start \(head.method.rawValue) \(head.uri) #\(number)\(close ? " close" : "")"
        case .forwardBody(let buffer): "body \(String(buffer: buffer))"
        case .forwardEnd(let trailers): trailers.map { "end \($0.map { "\($0.name)=\($0.value)" }.joined(separator: ","))" } ?? "end"
        case .awaitNextHead: "next"
        case .answerAndClose(let answer): "answer \(answer.status.code) \(answer.reasonCode)"
        case .abortExchange(let answer): answer.map { "abort, answer \($0.status.code) \($0.reasonCode)" } ?? "abort"
        case .close: "close"
        }
    }

    private static func machine() -> HTTP1ConnectionStateMachine {
        HTTP1ConnectionStateMachine(limits: HTTP1RequestParser.Limits(maxHeadBytes: 1024, maxURIBytes: 512))
    }

    /// Feeds `text` and runs the read loop to its `wait`, as the driver does.
    private static func read(_ text: String, into machine: inout HTTP1ConnectionStateMachine) -> [String] {
        machine.bytesRead(ByteBuffer(string: text))
        return Self.drain(&machine)
    }

    private static func drain(_ machine: inout HTTP1ConnectionStateMachine) -> [String] {
        var actions: [String] = []
        while true {
            let action = machine.nextRequestAction()
            actions.append(Self.describe(action))
            if case .wait = action { return actions }
            if actions.count > 50 { Issue.record("no wait after 50 actions"); return actions }
        }
    }

    private static let get = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"

    @Test func aRequestStartsItsExchangeAndTheNextWaitsForItsCompletion() {
        var machine = Self.machine()
        let got1 = Self.read(Self.get + "GET /b HTTP/1.1\r\nHost: x\r\n\r\n", into: &machine)
        #expect(got1 == ["start GET /a #1", "end", "wait"])
        // The pipelined request waits, and so does the socket's next read.
        let got2 = machine.readRequested()
        #expect(!got2)
        let got3 = machine.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got3 == .awaitNextHead)
        let resumed = machine.parsingResumes()
        #expect(resumed == .parse)
        let got4 = Self.drain(&machine)
        #expect(got4 == ["start GET /b #2", "end", "wait"])
        let got5 = machine.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got5 == .awaitNextHead)
        let got6 = machine.parsingResumes()
        #expect(got6 == .read, "nothing waits any more: the read held back for the pipelined request goes now")
        let got7 = machine.readRequested()
        #expect(got7)
    }

    @Test func aPipelinedRequestWaitsWhileTheResponseEndIsWrittenButTheExchangeNotComplete() {
        var machine = Self.machine()
        let got8 = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n", into: &machine)
        #expect(got8 == ["start POST /a #1", "wait"])
        // The backend answered early; the response's end is out, the exchange not done yet.
        machine.responseHeadWritten(status: .ok)
        let got9 = machine.responseEnded(closing: false)
        #expect(!got9)
        let got10 = Self.read("hiGET /b HTTP/1.1\r\nHost: x\r\n\r\n", into: &machine)
        #expect(got10 == ["wait"])
    }

    @Test func aBodyGoesToTheExchangeInItsParts() {
        var machine = Self.machine()
        let got11 = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", into: &machine)
        #expect(got11 == ["start POST /a #1", "body abc", "wait"])
        let got12 = Self.read("0\r\nX-T: 1\r\n\r\n", into: &machine)
        #expect(got12 == ["end X-T=1", "wait"])
    }

    @Test func connectionCloseAndHTTP10AskForTheCloseAfterTheirRequest() {
        var machine = Self.machine()
        let got13 = Self.read("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", into: &machine)
        #expect(got13 == ["start GET /a #1 close", "end", "wait"])
        let got14 = machine.exchangeCompleted(closeConnection: true, requestEnded: true)
        #expect(got14 == .closeAfterWrite)
        #expect(machine.isClosed)
        var old = Self.machine()
        let got15 = Self.read("GET /b HTTP/1.0\r\n\r\n", into: &old)
        #expect(got15 == ["start GET /b #1 close", "end", "wait"])
    }

    @Test func aHeadThatSaidCloseClosesTheConnectionWhateverTheExchangeDecides() {
        var machine = Self.machine()
        _ = Self.read(Self.get, into: &machine)
        machine.responseHeadWritten(status: .ok)
        machine.responseHeadSaysClose()
        let got16 = machine.responseEnded(closing: false)
        #expect(got16, "the end is written as the connection's last")
        let got17 = machine.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got17 == .closeAfterWrite)
    }

    @Test func aBodyDelimitedByTheCloseEndsTheConnection() {
        var machine = Self.machine()
        _ = Self.read(Self.get, into: &machine)
        let got18 = machine.responseEnded(closing: true)
        #expect(got18)
        let got19 = machine.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got19 == .closeAfterWrite)
    }

    @Test func anEarlyAnswerDropsTheRestOfTheRequestThenGoesOn() {
        var machine = Self.machine()
        let got20 = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nab", into: &machine)
        #expect(got20 == ["start POST /a #1", "body ab", "wait"])
        let got21 = machine.exchangeCompleted(closeConnection: false, requestEnded: false)
        #expect(got21 == .discardRequest(closeSoon: false))
        let got22 = Self.read("cd", into: &machine)
        #expect(got22 == ["wait"], "body bytes after the answer are dropped")
        let got23 = Self.read("ef" + Self.get, into: &machine)
        #expect(got23 == ["next", "start GET /a #2", "end", "wait"])
        let got24 = machine.discardGraceEnded()
        #expect(!got24, "a grace timer from before finds the connection serving again")
    }

    @Test func anEarlyAnswerThatClosesClosesAtTheEndOfTheBodyOrAfterTheGrace() {
        var ending = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n", into: &ending)
        let got25 = ending.exchangeCompleted(closeConnection: true, requestEnded: false)
        #expect(got25 == .discardRequest(closeSoon: true))
        let got26 = Self.read("abcd" + Self.get, into: &ending)
        #expect(got26 == ["close", "wait"], "the next request on it is never acted upon")
        let got27 = ending.discardGraceEnded()
        #expect(!got27)

        var stalling = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n", into: &stalling)
        let got28 = stalling.exchangeCompleted(closeConnection: true, requestEnded: false)
        #expect(got28 == .discardRequest(closeSoon: true))
        let got29 = stalling.discardGraceEnded()
        #expect(got29)
        #expect(stalling.isClosed)
    }

    @Test func bytesThatAreNotHTTPBetweenRequestsAreAnsweredThenClosed() {
        var machine = Self.machine()
        let got30 = Self.read("GET / HTTP/1.1\r\nHost : x\r\n\r\n", into: &machine)
        #expect(got30 == ["answer 400 malformed_http", "wait"])
        #expect(machine.isClosed)
        let got31 = Self.read(Self.get, into: &machine)
        #expect(got31 == ["wait"])
    }

    @Test func aHeadOverItsLimitIsAnswered431AndATargetOverItsLimit414() {
        var large = Self.machine()
        let got32 = Self.read("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 1100) + "\r\n\r\n", into: &large).first
        #expect(got32 == "answer 431 headers_too_large")
        var long = Self.machine()
        let got33 = Self.read("GET /" + String(repeating: "a", count: 1100) + " HTTP/1.1\r\n\r\n", into: &long).first
        #expect(got33 == "answer 414 uri_too_long")
    }

    @Test func aBrokenBodyIsAnsweredUntilTheResponseHasBegunThenOnlyCut() {
        let head = "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        var early = Self.machine()
        _ = Self.read(head, into: &early)
        machine(early, answers: "zz\r\n", with: "abort, answer 400 malformed_http")

        var late = Self.machine()
        _ = Self.read(head, into: &late)
        late.responseHeadWritten(status: .continue)
        machine(late, answers: "zz\r\n", with: "abort, answer 400 malformed_http", "an interim head does not begin the response")

        var begun = Self.machine()
        _ = Self.read(head, into: &begun)
        begun.responseHeadWritten(status: .ok)
        machine(begun, answers: "zz\r\n", with: "abort")
    }

    private func machine(
        _ machine: HTTP1ConnectionStateMachine, answers bytes: String, with expected: String, _ comment: Comment? = nil
    ) {
        var machine = machine
        let got34 = Self.read(bytes, into: &machine)
        #expect(got34 == [expected, "wait"], comment)
        #expect(machine.isClosed)
    }

    @Test func theExchangesBackpressureHoldsTheReadUntilItResumes() {
        var machine = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", into: &machine)
        let got35 = machine.setRequestReadingPaused(true)
        #expect(!got35)
        let got36 = machine.readRequested()
        #expect(!got36)
        let got37 = machine.readRequested()
        #expect(!got37, "held once, given once")
        let got38 = machine.setRequestReadingPaused(false)
        #expect(got38)
        let got39 = machine.takeHeldRead()
        #expect(!got39)
        let got40 = machine.readRequested()
        #expect(got40)
    }

    @Test func aClientNotTakingItsAnswersGetsNoNextRequestParsed() {
        var machine = Self.machine()
        let got41 = Self.read(Self.get, into: &machine)
        #expect(got41 == ["start GET /a #1", "end", "wait"])
        let got42 = machine.writabilityChanged(isWritable: false)
        #expect(got42 == .tellExchange(isWritable: false))
        let got43 = machine.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got43 == .awaitNextHead)
        let got44 = Self.read(Self.get, into: &machine)
        #expect(got44 == ["wait"], "a next request waits until the answers are taken")
        let got45 = machine.readRequested()
        #expect(!got45)
        let got46 = machine.writabilityChanged(isWritable: true)
        #expect(got46 == .resumeParsing)
        let got47 = Self.drain(&machine)
        #expect(got47 == ["start GET /a #2", "end", "wait"])
        let got48 = machine.writabilityChanged(isWritable: true)
        #expect(got48 == .tellExchange(isWritable: true))
    }

    @Test func shutdownClosesAnIdleConnectionAndMakesTheExchangeInFlightTheLast() {
        var idle = Self.machine()
        _ = Self.read(Self.get, into: &idle)
        let served = idle.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(served != .closeAfterWrite)
        _ = Self.drain(&idle)
        let got49 = idle.shutdownRequested()
        #expect(got49)
        #expect(idle.isClosed)

        // Opened and not yet asked anything: its first request is coming, and is answered as the last.
        var fresh = Self.machine()
        let closedFresh = fresh.shutdownRequested()
        #expect(!closedFresh)
        #expect(!fresh.isClosed)
        let started = Self.drain(&fresh)
        #expect(started == ["wait"])
        let freshStarted = Self.read(Self.get, into: &fresh)
        #expect(freshStarted.first == "start GET /a #1 close", "\(freshStarted)")
        let freshEnded = fresh.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(freshEnded == .closeAfterWrite)

        var busy = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n", into: &busy)
        let got50 = busy.shutdownRequested()
        #expect(!got50)
        #expect(busy.isDraining)
        let got51 = busy.exchangeCompleted(closeConnection: false, requestEnded: false)
        #expect(got51 == .discardRequest(closeSoon: true))

        var between = Self.machine()
        _ = Self.read(Self.get, into: &between)
        let got52 = between.shutdownRequested()
        #expect(!got52)
        let got53 = between.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got53 == .closeAfterWrite)

        var next = Self.machine()
        _ = Self.read(Self.get + Self.get, into: &next)
        _ = next.shutdownRequested()
        let got54 = next.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got54 == .closeAfterWrite)
        let got55 = Self.drain(&next)
        #expect(got55 == ["wait"], "a pipelined request after the last is not started")
    }

    @Test func theIdleDeadlineClosesBetweenRequestsAndOnAStalledBodyOnly() {
        var idle = Self.machine()
        let got56 = idle.idleTimedOut(exchangeReadsBody: false)
        #expect(got56 == .close)

        var waiting = Self.machine()
        _ = Self.read(Self.get, into: &waiting)
        let got57 = waiting.idleTimedOut(exchangeReadsBody: false)
        #expect(got57 == .none, "the response timeout counts while the backend answers")

        var stalled = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n", into: &stalled)
        let got58 = stalled.idleTimedOut(exchangeReadsBody: true)
        #expect(got58 == .closeWithExchange)
        #expect(stalled.isClosed)

        var heldBack = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n", into: &heldBack)
        _ = heldBack.setRequestReadingPaused(true)
        let got59 = heldBack.idleTimedOut(exchangeReadsBody: true)
        #expect(got59 == .none, "the gateway held the body back, not the client")

        var discarding = Self.machine()
        _ = Self.read("POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n", into: &discarding)
        _ = discarding.exchangeCompleted(closeConnection: false, requestEnded: false)
        let got60 = discarding.idleTimedOut(exchangeReadsBody: false)
        #expect(got60 == .close)
    }

    @Test func aCloseDropsWhatWaitsAndTellsTheExchangeOnce() {
        var machine = Self.machine()
        _ = Self.read(Self.get + Self.get, into: &machine)
        let got61 = machine.connectionClosed()
        #expect(got61)
        let got62 = machine.connectionClosed()
        #expect(!got62)
        let resumed = machine.parsingResumes()
        #expect(resumed == .none, "what waited was dropped with the close")
        let got63 = machine.exchangeCompleted(closeConnection: false, requestEnded: true)
        #expect(got63 == .none)
        let got64 = Self.read(Self.get, into: &machine)
        #expect(got64 == ["wait"])
    }

    @Test func emptyLinesBetweenRequestsAreSkippedWithinTheHeadLimit() {
        var machine = Self.machine()
        let got65 = Self.read("\r\n\r\n" + Self.get, into: &machine)
        #expect(got65 == ["start GET /a #1", "end", "wait"])
        var flood = Self.machine()
        _ = Self.read(Self.get, into: &flood)
        _ = flood.exchangeCompleted(closeConnection: false, requestEnded: true)
        let got66 = Self.read(String(repeating: "\r\n", count: 600), into: &flood)
        #expect(got66 == ["answer 431 headers_too_large", "wait"])
    }
}
