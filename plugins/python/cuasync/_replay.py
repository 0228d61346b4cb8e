# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Awaitable replays (C ABI 1.6): a `ReplayAnchor` marked inside a capture someone else makes (`torch.cuda.graph`, the
caller's `cuStreamBeginCapture`) counts the replays of that graph that get past it; `await anchor.wait(n)` resumes
once generation n is reached (never before that replay's work ahead of the mark has completed), with a replay's
device error raised as `CudaError`. Outside an event loop `anchor.wait(n).wait()` blocks instead.

    anchor = None
    with torch.cuda.graph(g, stream=side):
        y = model(x)
        anchor = cuasync.ReplayAnchor(cuasync.Stream.adopt(side))
    for _ in range(steps):
        g.replay()
        await anchor.wait(anchor.generation + 1)
"""
from __future__ import annotations

from typing import Optional

from . import _capi, errors
from ._loop import for_loop, running_loop, settle
from ._queues import block_until, reaper
from ._runtime import Stream

__all__ = ["ReplayAnchor", "ReplayWait"]


class ReplayAnchor:
    """A point of a graph being captured on `stream`. Keep it (and the stream) for as long as the graph is replayed:
    a replay after it is closed writes memory that was freed. `fault_check`: how often (seconds) a pending wait asks
    for a device error; None: 200 µs."""

    def __init__(self, stream: Stream, fault_check: Optional[float] = None) -> None:
        if not isinstance(stream, Stream):
            raise TypeError(f"ReplayAnchor: stream must be a cuasync.Stream, not {type(stream).__name__}")
        ns = 0 if fault_check is None else max(1, int(fault_check * 1e9))
        self.handle = None
        a = _capi.call("replay_anchor_mark", _capi.ReplayAnchorMarkArgs(stream=stream.handle, fault_check_ns=ns))
        self.handle = a.anchor
        self.stream = stream

    def _live(self):
        if not self.handle:
            raise errors.InvalidArgumentError("ReplayAnchor: the anchor was closed")
        return self.handle

    @property
    def generation(self) -> int:
        """The replays that have got past the mark so far."""
        return _capi.call("replay_anchor_wait", _capi.ReplayAnchorWaitArgs(anchor=self._live())).reached

    def wait(self, generation: int = 0) -> ReplayWait:
        """Generation `generation`'s completion (0: the next one): awaitable in the running event loop, or `.wait()`
        on it outside one."""
        errors.check_int(generation, "ReplayAnchor.wait: generation", 0, 1 << 64)
        return ReplayWait(self, generation)

    def close(self) -> None:
        """Destroys the anchor (waits still pending keep what they need)."""
        h, self.handle = self.handle, None
        if h:
            _capi.call("replay_anchor_destroy", _capi.ReplayAnchorDestroyArgs(anchor=h))

    def __del__(self):
        try:
            if getattr(self, "handle", None) and not _capi.exiting:
                self.close()
        except Exception:
            pass


class ReplayWait:
    """One generation's completion, through the running loop's queue (awaitable) or the reaper (`wait()`)."""

    __slots__ = ("anchor", "generation", "_future", "_state")

    def __init__(self, anchor: ReplayAnchor, generation: int) -> None:
        self.anchor = anchor  # kept until the completion: the anchor's stream and handle
        loop = running_loop()
        what = "ReplayAnchor.wait"
        if loop is not None:
            queue = for_loop(loop)
            self._future = fut = loop.create_future()
            self._state = None
            c = queue.completion(lambda code, cr: settle(fut, code, cr, what, self.generation))
        else:
            queue = reaper()
            self._future = None
            self._state = state = []
            c = queue.completion(lambda code, cr: state.append((code, cr)), gpu=False)
        try:
            a = _capi.call("replay_anchor_wait",
                           _capi.ReplayAnchorWaitArgs(anchor=anchor._live(), generation=generation, completion=c))
        except BaseException:
            queue.forget(c)
            raise
        self.generation = a.generation

    def __await__(self):
        if self._future is None:
            raise RuntimeError("this replay wait was made outside an event loop: call .wait()")
        return self._future.__await__()

    def wait(self, timeout: Optional[float] = None) -> int:
        """Blocks until the generation is reached (a wait made outside an event loop); returns it, or raises the
        replay's device error."""
        if self._future is not None:
            raise RuntimeError("this replay wait was made inside an event loop: await it")
        r = reaper()
        block_until(lambda: self._state, r.fd, r.drain, f"replay generation {self.generation}", timeout)
        code, cr = self._state[0]
        if code:
            raise errors.for_record(code, cr, "ReplayAnchor.wait")
        return self.generation
