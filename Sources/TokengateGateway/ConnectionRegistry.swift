//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOConcurrencyHelpers
import NIOCore

/// The open client connections, for the connection limit and for graceful shutdown.
///
/// Touched once when a connection opens and once when it closes, never per request, so a lock is fine.
final class ConnectionRegistry: Sendable {
    private let channels = NIOLockedValueBox<[ObjectIdentifier: any Channel]>([:])
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// Registers `channel`; `false` when the limit is reached (the caller closes the channel).
    func add(_ channel: any Channel) -> Bool {
        let added = self.channels.withLockedValue { channels -> Bool in
            guard channels.count < self.limit else { return false }
            channels[ObjectIdentifier(channel)] = channel
            return true
        }
        if added {
            channel.closeFuture.whenComplete { _ in
                self.channels.withLockedValue { _ = $0.removeValue(forKey: ObjectIdentifier(channel)) }
            }
        }
        return added
    }

    var count: Int { self.channels.withLockedValue { $0.count } }

    var all: [any Channel] { self.channels.withLockedValue { Array($0.values) } }
}
