//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Atomics
import CTokengateShims
import Dispatch
import Glibc

/// Upgrading the binary without a gap, as nginx does on `SIGUSR2`: the running gateway starts the executable
/// now at its own path (the new binary, once installed over the old) as a child that inherits every listening
/// socket, the systemd way (`$LISTEN_FDS`, named `listen[N]` and `admin` in `$LISTEN_FDNAMES`, read by
/// ``PassedSockets`` as socket activation's are), and waits until the child says it serves. Only then does the
/// old process stop accepting and drain; until then both accept from the same kernel queues, so no
/// connection is refused and none waiting in a queue is dropped (closing a listener of its own, as two processes
/// on `SO_REUSEPORT` would, drops what its queue holds).
///
/// The child reports readiness on a pipe (``readinessVariable`` names its descriptor) rather than to systemd:
/// with `NotifyAccess=main` systemd listens to the main process only, so the old process, still the main one,
/// tells systemd `MAINPID=` the child's id with `READY=1` (ending the `RELOADING=1` it sent at the signal), and
/// from then on systemd follows the child, which itself never says `READY=1`: the unit is already running.
///
/// A child that exits, cannot be run, or does not report within the timeout leaves the old process serving;
/// the outcome says why, for the log.
package enum BinaryHandover {
    /// The environment variable naming the descriptor the child writes `READY=1` to.
    package static let readinessVariable = "TOKENGATE_HANDOVER_FD"

    package enum Outcome: Sendable, Equatable {
        /// The child serves: its process id.
        case ready(pid_t)
        case failed(String)
    }

    /// The executable to start for a hand-over, fixed at process start: `argv[0]` when it is a path (made
    /// absolute against the start directory), so a symlink or file replaced at that path is what runs next;
    /// otherwise (found on `PATH`) the path `/proc/self/exe` names at start.
    package static func executablePath(argumentZero: String) -> String {
        if argumentZero.hasPrefix("/") { return argumentZero }
        if argumentZero.contains("/") {
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            if getcwd(&buffer, buffer.count) != nil {
                return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } + "/" + argumentZero
            }
        }
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return argumentZero }
        return buffer.withUnsafeBufferPointer { pointer in
            String(decoding: UnsafeRawBufferPointer(start: pointer.baseAddress, count: length), as: UTF8.self)
        }
    }

    /// Starts `executable` with `arguments` (after `argv[0]`) and `sockets` (name and descriptor, passed at 3, 4,
    /// ... in this order), and waits up to `timeout` for it to report ready. Cancelling the waiting task stops
    /// the child (SIGTERM) and returns a failure.
    package static func start(
        executable: String, arguments: [String], sockets: [(name: String, descriptor: CInt)], timeout: Duration
    ) async -> Outcome {
        var pipeEnds: [CInt] = [-1, -1]
        // pipe2 is not in Glibc's module; nothing else in the process forks between these calls.
        guard pipe(&pipeEnds) == 0 else { return .failed("pipe: \(String(cString: strerror(errno)))") }
        let (readEnd, writeEnd) = (pipeEnds[0], pipeEnds[1])
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        _ = fcntl(writeEnd, F_SETFD, FD_CLOEXEC)
        var environment = Self.inheritedEnvironment()
        environment.append("LISTEN_FDS=\(sockets.count)")
        environment.append("LISTEN_FDNAMES=\(sockets.map(\.name).joined(separator: ":"))")
        environment.append("\(Self.readinessVariable)=\(PassedSockets.firstDescriptor + CInt(sockets.count))")
        let descriptors = sockets.map(\.descriptor) + [writeEnd]
        var execErrno: CInt = 0
        let pid = Self.withCStrings([executable] + arguments) { argv in
            Self.withCStrings(environment) { envp in
                descriptors.withUnsafeBufferPointer { fds in
                    CTokengateShims_spawn_with_descriptors(executable, argv, envp, fds.baseAddress, CInt(fds.count), &execErrno)
                }
            }
        }
        close(writeEnd)
        guard pid > 0 else {
            close(readEnd)
            return .failed("cannot run \(executable): \(String(cString: strerror(execErrno)))")
        }
        let stopped = ManagedAtomic(false)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    let outcome = Self.awaitReadiness(readEnd, pid: pid, timeout: timeout, stopped: stopped)
                    close(readEnd)
                    continuation.resume(returning: outcome)
                }
            }
        } onCancel: {
            // The gateway is shutting down while the child starts: the child must not outlive the hand-over.
            stopped.store(true, ordering: .sequentiallyConsistent)
            kill(pid, SIGTERM)
        }
    }

    /// The child's side: writes `READY=1` to the descriptor ``readinessVariable`` names, when this process was
    /// started by a hand-over (read once, at start, by ``readinessDescriptor()``). Returns whether it did.
    package static func reportReady(_ descriptor: CInt) -> Bool {
        let message = Array("READY=1\n".utf8)
        let written = message.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
        return written == message.count
    }

    /// The readiness descriptor this process was given by a hand-over, or nil; the variable is removed (and the
    /// descriptor marked close-on-exec) so that a later hand-over from this process does not pass it on.
    package static func readinessDescriptor() -> CInt? {
        defer { unsetenv(Self.readinessVariable) }
        guard let value = SystemdNotifier.environment(Self.readinessVariable), let descriptor = CInt(value),
            descriptor > 2, fcntl(descriptor, F_GETFD) >= 0
        else { return nil }
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        return descriptor
    }

    // MARK: Parent side

    /// This process's environment minus what describes this process's own sockets and supervision: the
    /// `LISTEN_*` variables (set anew), the readiness variable, and `WATCHDOG_PID` when it names this process
    /// (the child, once the main process, is the one to ping; without the variable it takes `WATCHDOG_USEC` as
    /// its own).
    private static func inheritedEnvironment() -> [String] {
        var result: [String] = []
        var cursor = environ
        let own = "WATCHDOG_PID=\(getpid())"
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            let name = text.prefix { $0 != "=" }
            let dropped = ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", Self.readinessVariable].contains(String(name)) || text == own
            if !dropped { result.append(text) }
            cursor += 1
        }
        return result
    }

    private static func awaitReadiness(_ descriptor: CInt, pid: pid_t, timeout: Duration, stopped: ManagedAtomic<Bool>) -> Outcome {
        let seconds = timeout.components.seconds
        let deadline = DispatchTime.now() + .seconds(Int(seconds))
        var received: [UInt8] = []
        while true {
            let remaining = Int64(deadline.uptimeNanoseconds) - Int64(DispatchTime.now().uptimeNanoseconds)
            guard remaining > 0 else {
                kill(pid, SIGTERM)
                Self.reapInBackground(pid)
                return .failed("the new process (pid \(pid)) did not report ready within \(seconds)s; it was stopped")
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let polled = poll(&poller, 1, CInt(min(remaining / 1_000_000, 1000)))
            if polled < 0, errno != EINTR { return .failed("poll: \(String(cString: strerror(errno)))") }
            guard polled > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: 64)
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                received += buffer[..<count]
                if received.count > 64 { received.removeFirst(received.count - 64) }
                if String(decoding: received, as: UTF8.self).contains("READY=1\n") { return .ready(pid) }
                continue
            }
            if count < 0, errno == EINTR { continue }
            // End of file: the child closed the pipe without READY=1, which it does only by exiting.
            let status = Self.reap(pid)
            if stopped.load(ordering: .sequentiallyConsistent) {
                return .failed("the new process (pid \(pid)) was stopped: the gateway is shutting down")
            }
            return .failed("the new process (pid \(pid)) \(status) before it was ready (its log lines say why)")
        }
    }

    /// Waits for `pid` to end (it closed the readiness pipe, so it is ending) and describes how it ended.
    private static func reap(_ pid: pid_t) -> String {
        var status: CInt = 0
        var result: pid_t
        repeat { result = waitpid(pid, &status, 0) } while result < 0 && errno == EINTR
        guard result == pid else { return "ended" }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Glibc's module does not export as functions.
        if status & 0x7f == 0 { return "exited with status \((status >> 8) & 0xff)" }
        return "was killed by signal \(status & 0x7f)"
    }

    private static func reapInBackground(_ pid: pid_t) {
        DispatchQueue.global().async { _ = Self.reap(pid) }
    }

    private static func withCStrings<Result>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> Result) -> Result {
        var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
        pointers.append(nil)
        defer { for pointer in pointers { free(pointer) } }
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
