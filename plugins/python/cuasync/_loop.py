# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The completion queue of an asyncio event loop (`for_loop(loop)`), watched with `loop.add_reader` (the default loop
and uvloop). Operations that find their stream full (BUSY) wait in a per-stream backlog and are issued, in call
order, as places come back. When the loop goes, the references of its unfinished operations move to the reaper, so
memory the GPU still writes is never freed under it.
"""
import asyncio
import collections
import os
import time
import weakref

from . import _capi, errors
from . import _queues
from ._queues import _Queue, reaper, tokens

# After activity (an operation issued, a completion seen) an event loop drains its queue on every iteration for this
# long before it relies on the fd alone: the fd's wake-up (poller -> eventfd -> epoll -> loop) costs ~10-20 us, a
# drain ~1 us. The loop stays free meanwhile (other handlers run between drains); cf. the C++ executor window.
SPIN_S = float(os.environ.get("CUASYNC_PY_SPIN_US", "200")) * 1e-6
# The longest an idle loop (asyncio's ready queue empty) drains without yielding: long enough to catch a short kernel's
# completion without another loop iteration, short beside asyncio's own timer granularity (~1 ms).
_IDLE_SPIN_S = float(os.environ.get("CUASYNC_PY_IDLE_SPIN_US", "50")) * 1e-6
# How long an `await` of an operation polls its queue inline, before the task yields, when the loop has nothing else
# ready: work that is done or about to be (a short kernel) then completes the await without any loop iteration, at
# the cost of a blocking synchronize; longer work goes to the fd and the loop stays free. 0 turns it off.
_INLINE_POLL_S = float(os.environ.get("CUASYNC_PY_INLINE_POLL_US", "50")) * 1e-6


_future_await = asyncio.Future.__await__


class _OpFuture(asyncio.Future):
    """An operation's future, whose `await` first polls the operation's queue inline (bounded by _INLINE_POLL_S, only
    while the loop has nothing else ready). Otherwise an asyncio.Future in every way. It is also the handler of its
    completion record when nothing else is kept for the operation (`_what`: its description, or a callable making
    one), which saves the launch path an object per call."""

    __slots__ = ("_poll", "_what")

    def __await__(self):
        if not self.done():
            poll = self._poll
            if poll is not None:
                poll(self)
        return _future_await(self)  # the C future's own (no super object per await)

    __iter__ = __await__

    def __call__(self, code, cuda_result):  # its completion record, drained: once per operation
        if self.done():  # cancelled: the GPU work went on; it kept nothing alive
            return
        if code:
            self.set_exception(errors.for_record(code, cuda_result, self._what))
        else:
            self.set_result(None)


def settle(fut, code, cuda_result, what, result):
    if fut.done():  # cancelled: the GPU work went on; its references were held until now
        return
    if code:
        fut.set_exception(errors.for_record(code, cuda_result, what))
    else:
        fut.set_result(result)


class _Op:
    """An awaited operation: its future, how to issue it, and what it keeps alive until the GPU is done with it.
    Called with its completion record."""

    __slots__ = ("stream", "issue", "fut", "keep", "what", "result")

    def __init__(self, stream, issue, fut, keep, what, result):
        self.stream, self.issue, self.fut, self.keep, self.what, self.result = stream, issue, fut, keep, what, result

    def __call__(self, code, cuda_result):  # settle(), inline: once per operation
        fut = self.fut
        if fut.done():  # cancelled: the GPU work went on; its references were held until now
            return
        if code:
            fut.set_exception(errors.for_record(code, cuda_result, self.what))
        else:
            fut.set_result(self.result)


class LoopCompletions(_Queue):
    """The completion queue of one asyncio event loop."""

    def __init__(self, loop):
        super().__init__()
        self._loop = weakref.ref(loop)  # weak: the loop holds this queue (its reader), never the reverse
        self._backlogs = {}  # stream handle -> deque of _Op waiting for a place
        self._retry_armed = False
        self._spinning = False
        self._last_activity = 0.0
        self._spin_handle = None  # the spin's pending call_soon: not something the inline poll would hold up
        loop.add_reader(self.fd, self._readable)
        r = reaper()
        loop.add_reader(r.fd, r.drain)
        weakref.finalize(loop, LoopCompletions._loop_gone, self)

    def _readable(self):
        if self.drain():
            self._flush_backlogs()
            self._activity()

    def _activity(self):
        self._last_activity = time.perf_counter()
        if not self._spinning and SPIN_S > 0:
            self._spinning = True
            self._spin_handle = self._loop().call_soon(self._spin)

    def _spin(self):
        if self.handle is None:
            self._spinning = False
            return
        loop = self._loop()
        now = time.perf_counter()
        ran = self.drain()  # also clears the fd that a take_one below left readable
        if not ran and self._handlers:
            # Nothing else to run on the loop (asyncio's ready queue is empty): poll in a tight loop for a moment,
            # instead of a loop iteration (a select call) per drain. Bounded, so timers and I/O wait at most that.
            # One record at a time: its handler runs without the fd's two syscalls first (see take_one), and this thread
            # looks for finished work itself (poll_one: no hand-over from cuasync's poller thread).
            ready = getattr(loop, "_ready", None)
            if ready is not None and not ready:
                until = now + _IDLE_SPIN_S
                while time.perf_counter() < until:
                    if self.poll_one():
                        ran = 1
                        break
        if ran:
            if self._backlogs:
                self._flush_backlogs()
            self._last_activity = now
        # Armed for SPIN_S after activity even with nothing pending: a coroutine awaiting one operation after another
        # issues the next from the wake-up scheduled just before this, so this pass, in the same loop iteration,
        # already polls for it (stopping at the last completion cost a whole loop iteration per await).
        if now - self._last_activity < SPIN_S:
            self._spin_handle = loop.call_soon(self._spin)
        else:
            self._spinning = False

    def _poll_inline(self, fut):
        """Takes this queue's records one at a time until `fut` is done or _INLINE_POLL_S has passed, when `fut`'s
        operation is the only one in flight on this loop's queue (a coroutine awaiting one operation at a time; with
        more in flight the loop's spin and fd serve them all) and the loop has no callbacks ready (they would wait
        meanwhile; uvloop does not say: there only the first condition holds). The fd stays readable after
        take_one: the spin armed by the operation's submit drains it."""
        if self.handle is None or len(self._handlers) != 1:
            return
        loop = self._loop()
        ready = getattr(loop, "_ready", None)
        if loop is None or (ready and not (len(ready) == 1 and ready[0] is self._spin_handle)):
            return
        take = self.poll_one  # this thread's own look for finished work, then the record: no hand-over
        until = time.perf_counter() + _INLINE_POLL_S
        while not fut.done():
            if not take() and time.perf_counter() >= until:
                return

    def submit(self, loop, stream, issue, keep, what, result=None):
        """Issues `issue(queue, token) -> 0 | BUSY` now (errors raise here) or, behind a BUSY stream, later; returns
        the future of its completion. `loop`: this queue's loop, running (the caller has it at hand)."""
        fut = self._op_future(loop, what)  # its record's handler is the _Op below
        op = _Op(stream, issue, fut, keep, what, result)
        if self._backlogs and stream.handle in self._backlogs:
            self._backlogs[stream.handle].append(op)
        elif not self._issue(op, raise_errors=True):
            self._backlogs.setdefault(stream.handle, collections.deque()).append(op)
            self._arm_retry()
        self._activity()
        return op.fut

    def _op_future(self, loop, what):
        """A launch's future, also its record's handler, that polls this queue inline when awaited."""
        fut = _OpFuture(loop=loop)
        fut._poll = self._poll_inline if _INLINE_POLL_S > 0 else None
        fut._what = what
        return fut

    def submit_fired(self, loop, stream, fire, blob, what):
        """submit() for a launch the compiled fast path packed into `blob`: `fire(blob, queue, token) -> 0 | error`
        issues it. The common case (the stream has room) makes one future and no other object; a BUSY stream takes the
        general path's backlog."""
        fut = self._op_future(loop, what)
        if not (self._backlogs and stream.handle in self._backlogs):
            token = next(tokens)
            handlers = self._handlers
            handlers[token] = fut
            try:
                err = fire(blob, self.handle, token)
            except BaseException:
                del handlers[token]
                raise
            if not err:
                self._activity()
                return fut
            del handlers[token]
            _capi.code_of(err)  # raises every error but BUSY: then the backlog, as submit() does
        op = _Op(stream, _fired_issue(fire, blob), fut, None, what, None)
        self._backlogs.setdefault(stream.handle, collections.deque()).append(op)
        self._arm_retry()
        self._activity()
        return fut

    def fired(self, loop, stream, token, kernel):
        """The future of `kernel`'s launch that the compiled path already issued with `token` into this queue (no
        backlog here, room on its stream): made after the launch, so the kernel reaches the driver before any Python
        runs. Nothing drains this queue in between: only its loop's thread does, from these methods."""
        fut = self._op_future(loop, lambda: kernel._describe_launch(stream))
        self._handlers[token] = fut
        self._activity()
        return fut

    def _issue(self, op, raise_errors):
        token = next(tokens)
        handlers = self._handlers
        handlers[token] = op  # run (and dropped, with the references it keeps) when its record is drained
        try:
            code = op.issue(self.handle, token)
        except BaseException as e:
            del handlers[token]
            if raise_errors:
                raise
            if not op.fut.done():
                op.fut.set_exception(e)
            return True
        if code:  # BUSY: nothing was enqueued
            del handlers[token]
            return False
        return True

    def _flush_backlogs(self):
        for handle in list(self._backlogs):
            backlog = self._backlogs[handle]
            while backlog:
                if backlog[0].fut.cancelled():  # never issued: nothing on the GPU to wait for
                    backlog.popleft()
                    continue
                if not self._issue(backlog[0], raise_errors=False):
                    break
                backlog.popleft()
            if not backlog:
                del self._backlogs[handle]
        if self._backlogs:
            self._arm_retry()

    def _arm_retry(self):
        # Places come back with completions; a timer covers places held by work this loop does not await.
        if not self._retry_armed:
            self._retry_armed = True
            self._loop().call_later(0.0002, self._retry)

    def _retry(self):
        self._retry_armed = False
        self._flush_backlogs()

    @staticmethod
    def _loop_gone(self):
        # The loop was closed (and maybe collected): its futures will never be awaited, but the GPU may still use
        # memory their operations hold. Hand those references to the reaper until each stream's work is done, then
        # drop the queue.
        if _capi.exiting or self.handle is None:
            return
        by_stream = {}
        for op in self._handlers.values():
            if isinstance(op, _Op):
                by_stream.setdefault(op.stream.handle, (op.stream, []))[1].append(op.keep)
        self._backlogs.clear()
        for stream, keeps in by_stream.values():
            try:
                reaper().keep_until_done(stream, keeps)
            except errors.CuasyncError:
                pass  # the stream's context failed: no work of cuasync's can still run on that memory
        self._handlers.clear()
        self.destroy()


def _fired_issue(fire, blob):
    """An _Op's issue() for a launch packed into `blob` (retried from a backlog)."""
    def issue(queue, token):
        err = fire(blob, queue, token)
        return _capi.code_of(err) if err else 0
    return issue


_loops = weakref.WeakKeyDictionary()


_last = (lambda: None, None)  # the last (loop, its completions) looked up: most calls come from one loop


def for_loop(loop):
    global _last
    last = _last  # one read: another thread may replace it meanwhile
    if last[0]() is loop:
        return last[1]
    lc = _loops.get(loop)
    if lc is None:
        _sweep_closed_loops(force=True)
        lc = _loops[loop] = LoopCompletions(loop)
    _last = (weakref.ref(loop), lc)
    return lc


_next_sweep = 0.0


def _sweep_closed_loops(force=False):
    """Hands over the operations of loops that were closed but are not collected (their pending futures keep them):
    at most every 50 ms from collect(), and whenever a new loop comes."""
    global _next_sweep
    if not _loops.data:  # the mapping's own dict: WeakKeyDictionary.__len__ is Python code, and this runs per call
        return
    now = time.monotonic()
    if not force and now < _next_sweep:
        return
    _next_sweep = now + 0.05
    for loop in [lp for lp in list(_loops.keys()) if lp.is_closed()]:
        lc = _loops.pop(loop, None)  # another thread may sweep too
        if lc is not None:
            LoopCompletions._loop_gone(lc)


_queues._sweeps.append((_loops.data, _sweep_closed_loops))  # called only while some loop has a queue


running_loop = asyncio._get_running_loop  # this thread's running loop or None: a C-level lookup
