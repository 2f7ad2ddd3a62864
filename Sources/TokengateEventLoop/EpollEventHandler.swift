//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What an ``EpollEventLoop`` calls: one object per registered socket (a listener, a client connection, an
/// upstream connection). All calls come on the loop's thread, one at a time, and never while another call of
/// the same loop is on the stack.
public protocol EpollEventHandler: AnyObject {
    /// epoll reported `events` for this handler's socket. Edge-triggered: read until a short read or
    /// ``Socket/IOResult/wouldBlock``, or no new edge comes for the bytes left behind.
    func socketReady(_ events: SocketEvents, loop: EpollEventLoop)

    /// The tick this handler asked to be called at the end of (``EpollEventLoop/callAtTickEnd(_:)``) has
    /// handled all its events: the place for writes batched across the tick.
    func tickEnded(loop: EpollEventLoop)

    /// A deadline armed with ``EpollEventLoop/schedule(in:for:tag:)`` is due.
    func timerFired(tag: UInt32, loop: EpollEventLoop)
}
