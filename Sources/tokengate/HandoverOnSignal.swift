//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle
import TokengateAdmin
import TokengateGateway
import UnixSignals

/// Hands the listening sockets over to a new binary on SIGUSR2 (``BinaryHandover``), until shutdown. Once the
/// new process serves, this service returns, and the group shuts down gracefully: this process stops accepting
/// and drains exactly as on SIGTERM (it is configured with `successTerminationBehavior: .gracefullyShutdownGroup`).
/// A failed hand-over is logged and this process keeps serving; another SIGUSR2 tries again.
struct HandoverOnSignal: Service {
    /// How long the new process may take from exec to serving: reading the cutoff store included (systemd's
    /// `TimeoutStartSec=` in the unit is 90 s too).
    static let readinessTimeout = Duration.seconds(90)

    let server: GatewayServer
    let admin: AdminServer?
    /// The executable and arguments this process was started with (``BinaryHandover/executablePath(argumentZero:)``).
    let executable: String
    let arguments: [String]
    /// Set once the new process serves: the drain that follows must not tell systemd `STOPPING=1` (systemd
    /// follows the new main process by then).
    let handedOver: NIOLockedValueBox<Bool>
    let logger: Logger

    func run() async throws {
        let signals = await UnixSignalsSequence(trapping: .sigusr2)
        await cancelWhenGracefulShutdown {
            for await _ in signals {
                if await self.handOver() { return }
            }
        }
    }

    /// One hand-over; true when the new process serves.
    private func handOver() async -> Bool {
        var sockets = self.server.listeningDescriptors.enumerated().map { (name: PassedSockets.name(listener: $0.offset), descriptor: $0.element) }
        if let descriptor = self.admin?.descriptor { sockets.append((name: PassedSockets.adminName, descriptor: descriptor)) }
        guard !sockets.isEmpty else { return false }
        self.logger.info("binary hand-over: starting the new process", metadata: ["executable": "\(self.executable)", "sockets": "\(sockets.count)"])
        // The unit shows "reloading" until the hand-over ends: READY=1 below, whichever way it went.
        SystemdNotifier.process?.reloading()
        let outcome = await BinaryHandover.start(
            executable: self.executable, arguments: self.arguments, sockets: sockets, timeout: Self.readinessTimeout)
        switch outcome {
        case .ready(let pid):
            self.handedOver.withLockedValue { $0 = true }
            // Still the main process: systemd (NotifyAccess=main) takes the new main process's id only from it, and
            // reads MAINPID= before READY=1 in one message: the unit is back to "active" with the new process as
            // its main one, before this one exits (an exit of the main process while "reloading" stops the unit).
            SystemdNotifier.process?.notify("MAINPID=\(pid)\nREADY=1")
            self.logger.info("binary hand-over: the new process serves; draining", metadata: ["pid": "\(pid)"])
            return true
        case .failed(let reason):
            self.logger.error("binary hand-over failed; this process keeps serving", metadata: ["reason": "\(reason)"])
            SystemdNotifier.process?.ready()
            return false
        }
    }
}
