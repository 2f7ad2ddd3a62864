//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers

// MARK: The LISTEN connection.

extension PostgresCutoffStore {
    /// Keeps one connection listening on the notify channel and turns notifications into ``changeSignals``.
    /// Blocking: runs on a thread of the store's thread pool for as long as ``run()`` runs, and returns once
    /// `stop` fires (``close()``, or ``run()``'s task cancelled).
    ///
    /// Order per connection: read the password file if there is one, connect (bounded by
    /// ``Configuration/connectTimeout``), `LISTEN "channel"`, mark listening, yield one signal, drain what arrived
    /// with the `LISTEN` result, then loop: `poll()` on the socket and `stop` (no timeout: the socket or the stop
    /// pipe wakes it), `PQconsumeInput`, drain `PQnotifies`.
    ///
    /// Every (re)established LISTEN yields a signal: notifications sent while the connection was down are lost, so
    /// the sync service must reload to catch up. Reconnects back off from 100 ms to 2 s; the back-off sleep also
    /// ends at once when `stop` fires.
    nonisolated func listenLoop(stop: PostgresInterrupt) {
        // Validated in init; quoted, as LISTEN takes a name, not a parameter.
        guard
            let channel = try? PostgresIdentifier(
                self.configuration.notifyChannel, what: "the notify channel", allowSchema: false)
        else {
            preconditionFailure("the notify channel was validated in init")
        }
        var delay = Duration.milliseconds(100)
        var failing = false
        while !stop.isFired {
            do {
                let attempt = try self.listenParameters.forConnecting(
                    passwordFile: self.passwordFile, store: self.storeDescription)
                let connection = try PostgresConnection.connect(
                    keywords: attempt.keywords,
                    values: attempt.values,
                    deadline: ContinuousClock.now.advanced(by: self.configuration.connectTimeout),
                    interrupt: stop
                )
                try connection.execute(
                    "LISTEN \(channel.quoted)",
                    deadline: ContinuousClock.now.advanced(by: self.configuration.operationTimeout),
                    interrupt: stop
                )
                self.runState.withLockedValue { $0.listening = true }
                if failing {
                    self.logger.info(
                        "cutoff store LISTEN connection is back", metadata: ["store": "\(self.storeDescription)"])
                }
                failing = false
                delay = .milliseconds(100)
                self.signalSink.yield(CutoffChangeSignal(user: nil))
                var payloads = connection.takeNotifications()
                while true {
                    for payload in payloads {
                        self.signalSink.yield(CutoffChangeSignal(user: payload == "*" || payload.isEmpty ? nil : payload))
                    }
                    payloads = try connection.waitForNotifications(interrupt: stop)
                }
            } catch {
                self.runState.withLockedValue { $0.listening = false }
                if !stop.isFired {
                    self.listenFailed(error, alreadyFailing: &failing)
                }
            }
            // The connection (if any) is released above, which closes it, before the back-off.
            if stop.sleep(for: delay) {
                break
            }
            delay = min(delay * 2, .seconds(2))
        }
        self.runState.withLockedValue { $0.listening = false }
    }

    private nonisolated func listenFailed(_ error: any Error, alreadyFailing: inout Bool) {
        // Logged once per outage; polling keeps the snapshot current meanwhile (and the sync service reports stale).
        if !alreadyFailing {
            self.logger.warning(
                "cutoff store LISTEN connection lost; retrying, changes arrive by polling meanwhile",
                metadata: ["error": "\(self.storeError(error))"]
            )
        }
        alreadyFailing = true
    }
}
