# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Operations: `issue()` runs a C call that enqueues work with a completion, awaitable inside an event loop (its
queue: `_loop.py`), a `Pending` to `.wait()` on outside one; host tokens complete through the same queues.

Queues and blocking waits: `_queues.py` (`reaper()`, `collect()`, `thread_waiter()`).
"""
from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, Union

from . import _capi, errors
from ._loop import for_loop, running_loop, settle
from ._queues import block_until, collect, reaper, thread_waiter, tokens

if TYPE_CHECKING:
    from ._runtime import Stream

__all__ = ["HostToken", "Pending", "collect", "for_loop", "host_token", "issue", "reaper", "thread_waiter"]


class Pending:
    """An operation issued outside an event loop. `wait()` blocks until it completed (and raises its error)."""

    __slots__ = ("_stream", "_state", "what", "_probe")

    def __init__(self, stream: Stream, what: Union[str, Callable[[], str]], tracked: bool) -> None:
        self._stream = stream
        self.what = what
        self._state = [] if tracked else None  # tracked: [ (code, cuda_result) ] once complete
        self._probe = None  # without a completion of its own: the event done() recorded after it, asked again

    def _token(self, keep):
        state = self._state

        def done(code, cuda_result):
            state.append((code, cuda_result))
            return keep
        return reaper().token(done)

    def done(self) -> bool:
        """True once the operation has completed (never blocks). An operation without a completion of its own (a launch
        outside a loop) is done once the work its stream had at the first `done()` is: an event recorded then (not
        while a staged copy still holds the stream: False until it lets go) and asked again on later calls."""
        collect()
        if self._state is None:
            if self._probe is None:
                from ._runtime import Event
                try:
                    self._probe = Event(self._stream, wait_for_staging=False)
                except errors.BusyError:
                    return False
            return self._probe.query()
        return bool(self._state)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Blocks until the operation has completed (at most `timeout` seconds); raises its error if it failed."""
        if self._state is None:  # no completion of its own: the stream's completion covers it
            thread_waiter().wait_stream(self._stream, timeout)
            return
        r = reaper()
        block_until(lambda: self._state, r.fd, r.drain, self._description(), timeout)
        code, cuda_result = self._state[0]
        if code:
            raise errors.for_record(code, cuda_result, self.what)

    def _description(self):
        what = self.what  # a description, a callable making one, or the Kernel launched (the compiled path's)
        describe = getattr(what, "_describe_launch", None)
        return describe(self._stream) if describe is not None else _text(what)

    def __await__(self):
        raise RuntimeError(f"{self._description()} was issued outside an event loop: call .wait(), or issue it inside a "
                           "coroutine to await it")
        yield  # pragma: no cover


def _text(what):
    """An operation's description (made lazily: most never need it)."""
    return what() if callable(what) else what


def issue(stream, what, call, keep=None, result=None, tracked=True):
    """Issues an operation: `call(queue, token) -> 0 | BUSY` (0, 0: no completion). Inside a running event loop it returns an awaitable
    future (a BUSY stream queues the operation behind its earlier ones); outside one, it retries a BUSY stream with
    short sleeps, like a driver whose queue is full, and returns a `Pending`. `keep` is held until the GPU is done."""
    loop = running_loop()
    if loop is not None and tracked:
        return for_loop(loop).submit(loop, stream, call, keep, what, result)
    collect()
    p = Pending(stream, what, tracked and keep is not None)
    backoff = BusyBackoff()
    while True:
        token = p._token(keep) if p._state is not None else 0
        try:
            code = call(reaper().handle if token else 0, token)
        except BaseException:
            if token:
                reaper().forget(token)
            raise
        if code != errors.BUSY:
            return p
        if token:
            reaper().forget(token)
        backoff.wait(lambda: f"{_text(what)}: the stream stayed full for 60 s")
        collect()


class BusyBackoff:
    """Retrying a call its stream refused as BUSY, like a driver whose queue is full: short sleeps growing from 20 us
    to 1 ms, BusyError after 60 s."""

    __slots__ = ("delay", "deadline")

    def __init__(self):
        self.delay, self.deadline = 0.0, None

    def wait(self, message):
        """Sleeps before the next try; `message()` is the BusyError's text once 60 s have passed."""
        now = time.perf_counter()
        self.deadline = self.deadline or now + 60.0
        if now > self.deadline:
            raise errors.BusyError(message())
        time.sleep(self.delay)
        self.delay = min(max(self.delay * 2, 20e-6), 1e-3)


def host_token() -> HostToken:
    """A host completion: `complete()` it from any thread; awaitable in the loop that made it (or `.wait()`)."""
    return HostToken()


class HostToken:
    """Host work that completes through the same queues as GPU work (the asyncio plumbing without a GPU)."""

    def __init__(self) -> None:
        loop = running_loop()
        self._lock = threading.Lock()
        self.handle = None
        self._state = []
        if loop is not None:
            lc = for_loop(loop)
            self._future = loop.create_future()
            fut = self._future
            c = lc.completion(lambda code, cr: settle(fut, code, cr, "host token", None))
            queue = lc
        else:
            self._future = None
            state = self._state
            c = reaper().completion(lambda code, cr: state.append((code, cr)), gpu=False)
            queue = reaper()
        try:
            self.handle = _capi.call("host_token_create", _capi.HostTokenCreateArgs(completion=c)).token
        except BaseException:
            queue.forget(c)
            raise
        self._fd = queue.fd

    def complete(self, error_code: int = 0) -> None:
        """Completes it (from any thread), with CUASYNC_OK or an error code. Once: a refused call (a code that is no
        cuasync error code) leaves it to be completed."""
        if isinstance(error_code, bool) or not isinstance(error_code, int):
            raise errors.InvalidArgumentError(f"host token: error code {error_code!r} is not an int")
        with self._lock:
            h = self.handle
            if not h:
                raise errors.InvalidArgumentError("host token completed twice")
            _capi.call("host_token_complete", _capi.HostTokenCompleteArgs(token=h, code=error_code))
            self.handle = None

    def __del__(self):
        # Dropped without being completed: completed as cancelled, so that its C token and its handler go too.
        try:
            if getattr(self, "handle", None) and not _capi.exiting:
                self.complete(errors.CANCELLED)
        except Exception:
            pass

    def __await__(self):
        if self._future is None:
            raise RuntimeError("this host token was made outside an event loop: call .wait()")
        return self._future.__await__()

    def wait(self, timeout: Optional[float] = None) -> None:
        """Blocks until the token is completed (a token made outside an event loop); raises its error code."""
        if self._future is not None:  # its completion settles the loop's future, drained only by that loop
            raise RuntimeError("this host token was made inside an event loop: await it")
        r = reaper()
        block_until(lambda: self._state, r.fd, r.drain, "host token", timeout)
        code, cr = self._state[0]
        if code:
            raise errors.for_record(code, cr, "host token")
