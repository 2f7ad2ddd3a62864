//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOPosix

/// Runs one load: opens every connection first (so handshakes are not measured), starts them all at one
/// instant, waits until each is finished or the hard stop, and collects what the loops measured.
struct LoadRunner {
    struct Outcome: Sendable {
        let stats: StatsSnapshot
        /// From the common start to the last answer.
        let elapsedSeconds: Double
        let gatewayBefore: [ProcessUsage]
        let gatewayAfter: [ProcessUsage]
        let clientBefore: ProcessUsage
        let clientAfter: ProcessUsage
        let alpn: String?
        let tlsVersion: String?
    }

    let shared: LoadShared
    let gatewayPIDs: [Int32]

    func run() async throws -> Outcome {
        let plan = self.shared.plan
        let group = MultiThreadedEventLoopGroup(numberOfThreads: plan.threads)
        do {
            let outcome = try await self.run(on: group)
            try? await group.shutdownGracefully()
            return outcome
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    private func run(on group: MultiThreadedEventLoopGroup) async throws -> Outcome {
        let plan = self.shared.plan
        let shared = self.shared
        let loops = Array(group.makeIterator())
        var perLoop: [NIOLoopBound<LoopStats>] = []
        for loop in loops {
            perLoop.append(try await loop.submit { NIOLoopBound(LoopStats(), eventLoop: loop) }.get())
        }
        let stats = perLoop
        var created: [NIOLoopBound<ConnectionSlot>] = []
        var readies: [EventLoopFuture<Void>] = []
        for index in 0..<plan.connections {
            let loop = loops[index % loops.count]
            let loopStats = stats[index % loops.count]
            let (slot, ready) = try await loop.submit {
                let slot = ConnectionSlot(index: index, loop: loop, stats: loopStats.value, shared: shared)
                return (NIOLoopBound(slot, eventLoop: loop), slot.connect())
            }.get()
            created.append(slot)
            readies.append(ready)
        }
        let slots = created
        do {
            // andAllComplete, then check: every slot settles before anything is torn down.
            let results = try await EventLoopFuture.whenAllComplete(readies, on: loops[0]).get()
            for case .failure(let error) in results { throw error }
        } catch {
            for slot in slots { slot.eventLoop.execute { slot.value.abort() } }
            throw error
        }
        let (alpn, tlsVersion) = try await slots[0].eventLoop.submit {
            (slots[0].value.alpn, slots[0].value.tlsVersion)
        }.get()

        let gatewayBefore = try self.gatewayPIDs.map { try ProcessUsage.sample(pid: $0) }
        let clientBefore = try ProcessUsage.sample(pid: nil)
        let start = NIODeadline.now().uptimeNanoseconds + 20_000_000
        let duration = plan.duration.map { UInt64($0.nanoseconds) }
        for slot in slots {
            slot.eventLoop.execute { slot.value.start(at: start, duration: duration) }
        }
        let hardStop = start + (duration.map { $0 + UInt64(plan.grace.nanoseconds) } ?? UInt64(plan.maxTime.nanoseconds))
        let stopper = loops[0].scheduleTask(deadline: .uptimeNanoseconds(hardStop)) {
            for slot in slots { slot.eventLoop.execute { slot.value.abort() } }
        }
        let finished = try await loops[0].submit { slots[0].value.finished }.get()
        var all = [finished]
        for slot in slots.dropFirst() {
            all.append(try await slot.eventLoop.submit { slot.value.finished }.get())
        }
        _ = try await EventLoopFuture.whenAllComplete(all, on: loops[0]).get()
        stopper.cancel()
        let gatewayAfter = try self.gatewayPIDs.map { try ProcessUsage.sample(pid: $0) }
        let clientAfter = try ProcessUsage.sample(pid: nil)

        var merged = StatsSnapshot.empty
        for loopStats in stats {
            merged.merge(try await loopStats.eventLoop.submit { loopStats.value.snapshot }.get())
        }
        let end = max(merged.lastAnswerAt, start + 1)
        return Outcome(
            stats: merged,
            elapsedSeconds: Double(end - start) / 1e9,
            gatewayBefore: gatewayBefore,
            gatewayAfter: gatewayAfter,
            clientBefore: clientBefore,
            clientAfter: clientAfter,
            alpn: alpn,
            tlsVersion: tlsVersion
        )
    }
}
