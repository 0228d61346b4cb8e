# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Completion queues: a C completion queue (eventfd) whose records run Python handlers on the thread that drains it,
so no Python ever runs on a driver or cuasync thread.

- `reaper()`: the process's queue for work nobody awaits (references held until the GPU is done with them, tensors
  imported by DLPack given back). It is drained under a lock by whichever thread calls into cuasync next, by every
  event loop that uses cuasync (a reader on its fd), by `collect()` and by blocking waits.
- `thread_waiter()`: a queue per thread for blocking waits (`Stream.synchronize`).
- `block_until()`: how a thread blocks on a queue (a short spin, then sleeps on its fd).

The asyncio side (a queue per event loop) is `_loop.py`; operations and host tokens are `_completion.py`.
"""
from __future__ import annotations

import ctypes
import itertools
import select
import threading
import time

from . import _capi, _fastpath, errors

_CAPACITY = 64
tokens = itertools.count(1)  # next() is atomic under the GIL: one sequence for every queue's tokens


class _Queue:
    """A C queue with an fd; each token maps to a handler(code, cuda_result) run by the thread that drains."""

    def __init__(self):
        self.handle = _capi.call("queue_create", _capi.QueueCreateArgs(flags=_capi.QUEUE_FD)).queue
        self.fd = _capi.call("queue_fd", _capi.QueueFdArgs(queue=self.handle)).fd
        self._records = (_capi.CompletionRecord * _CAPACITY)()
        self._drain_args = _capi.QueueDrainArgs(queue=self.handle, records=self._records, capacity=_CAPACITY)
        self._drain_args.struct_size = ctypes.sizeof(self._drain_args)
        self._drain_address = ctypes.addressof(self._drain_args)
        # The same records, asked for one at a time (take_one).
        self._take_args = _capi.QueueDrainArgs(queue=self.handle, records=self._records, capacity=1)
        self._take_args.struct_size = ctypes.sizeof(self._take_args)
        self._take_address = ctypes.addressof(self._take_args)
        self._drain_call = _capi.function("queue_drain")
        self._handlers = {}
        fast = _fastpath.get()
        # The compiled drains: records read and handlers popped and called in C (same protocol, no ctypes).
        self._fast_drain = fast.drain if fast is not None else None
        self._fast_take = fast.take_one if fast is not None else None
        # poll_one's: queue_poll (ABI 1.7) where the library has it, else take_one's drain.
        self._fast_poll = getattr(fast, "poll_one", None) if fast is not None else None
        self._poll_call = _capi.function("queue_poll") if _capi.has("queue_poll") else self._drain_call

    def completion(self, handler, **kind):
        """A `cuasync_completion` that runs `handler(code, cuda_result)` when drained; `forget` it if unused."""
        return _capi.Completion(queue=self.handle, token=self.token(handler, **kind))

    def token(self, handler, **kind):
        """A token of this queue that runs `handler(code, cuda_result)` when drained (`forget` it if unused)."""
        token = next(tokens)
        self._handlers[token] = handler
        return token

    def forget(self, completion):
        self._handlers.pop(completion if isinstance(completion, int) else completion.token, None)

    def pending(self):
        return len(self._handlers)

    def drain(self):
        """Runs the handlers of every queued record; returns how many ran. The fd protocol: drain until a call
        returns fewer records than asked for."""
        if self._fast_drain is not None:
            return self._fast_drain(self.handle, self._handlers)
        ran = 0
        while True:
            err = self._drain_call(self._drain_address)
            if err:
                _capi.raise_error("queue_drain", err)
            n = self._drain_args.count
            for i in range(n):
                r = self._records[i]
                handler = self._handlers.pop(r.token, None)
                if handler is not None:
                    handler(r.code, r.cuda_result)
                    ran += 1
            if n < _CAPACITY:
                return ran

    def take_one(self):
        """Runs the handler of the oldest queued record, if any; returns how many records it took (0 or 1). For a
        consumer that spins: a drain that finds the queue empty also clears the fd (it waits for the delivery's
        eventfd write to finish, then reads it: two syscalls between the record and its handler), whereas one that
        fills its buffer leaves that to the next drain. The fd stays readable until a `drain()`: call one soon after
        (the spin does, on its next pass; or the fd wakes the loop, level-triggered, to do it)."""
        if self._fast_take is not None:
            return self._fast_take(self.handle, self._handlers)
        return self._take_with(self._drain_call, "queue_drain")

    def poll_one(self):
        """take_one, after this thread looked for finished GPU work itself (ABI 1.7's queue_poll: the engine's pass,
        made here when no other is running): for a consumer that spins while it expects a completion within
        microseconds, whose record then needs no hand-over from cuasync's poller thread. take_one with an older
        library."""
        if self._fast_poll is not None:
            return self._fast_poll(self.handle, self._handlers)
        return self._take_with(self._poll_call, "queue_poll")

    def _take_with(self, call, name):
        err = call(self._take_address)
        if err:
            _capi.raise_error(name, err)
        if not self._take_args.count:
            return 0
        r = self._records[0]
        handler = self._handlers.pop(r.token, None)
        if handler is not None:
            handler(r.code, r.cuda_result)
        return 1

    def destroy(self):
        if self.handle and not _capi.exiting:
            _capi.call("queue_destroy", _capi.QueueDestroyArgs(queue=self.handle))
        self.handle = None

    def __del__(self):  # a thread's waiter goes with its thread: its C queue and eventfd with it
        try:
            self.destroy()
        except Exception:
            pass


class _Reaper(_Queue):
    """The process's queue for work nobody awaits; drained under a lock from any thread. A handler dropping the last
    reference to a buffer runs its free, which drains again: on the same thread that inner drain returns at once
    (the outer one is using the records), instead of waiting for its own lock."""

    def __init__(self):
        super().__init__()
        self._lock = threading.RLock()
        self._draining = False
        self._gpu_tokens = set()  # tokens of GPU work (not host tokens): what the process waits for at exit

    def token(self, handler, gpu=True):
        token = super().token(handler)
        if gpu:
            self._gpu_tokens.add(token)
        return token

    def forget(self, completion):
        super().forget(completion)
        self._gpu_tokens.discard(completion if isinstance(completion, int) else completion.token)

    def gpu_pending(self):
        self._gpu_tokens.intersection_update(self._handlers)  # drained ones are done
        return len(self._gpu_tokens)

    def drain(self):
        if not self._handlers:
            return 0
        with self._lock:
            if self._draining:
                return 0
            self._draining = True
            try:
                return super().drain()
            finally:
                self._draining = False

    def keep_until_done(self, stream, keep):
        """Holds `keep` until the work enqueued on `stream` so far has completed."""
        c = self.completion(lambda code, cuda_result: keep)
        try:
            _capi.call("stream_wait", _capi.StreamWaitArgs(stream=stream.handle, completion=c))
        except BaseException:
            self.forget(c)
            raise


_reaper = None
_reaper_lock = threading.Lock()


def reaper():
    global _reaper
    if _reaper is None:
        with _reaper_lock:
            if _reaper is None:
                _reaper = _Reaper()
    return _reaper


def collect() -> None:
    """Runs what finished work left to do (references dropped, imported tensors given back). Cheap; cuasync calls it
    itself on most calls (with nothing to do, it calls nothing: launches pay for it on every call)."""
    r = _reaper
    if r is not None and r._handlers:
        r.drain()
    for pending, sweep in _sweeps:
        if pending:
            sweep()


# More for collect() to do: (a container, the sweep to call while it is not empty): the asyncio side's loops, the
# frees waiting for a staged copy.
_sweeps = []


def wait_for_gpu_work_at_exit(timeout_s=10.0):
    """Blocks until the GPU work nobody awaited is done (cuasync's copy threads may still be writing into host memory
    it holds), for at most `timeout_s`."""
    r = _reaper
    if r is None or not r.gpu_pending():
        return
    try:
        block_until(lambda: not r.gpu_pending(), r.fd, r.drain, "work still running at exit", timeout_s)
    except TimeoutError:
        pass


def wait_fd(fd, timeout_s):
    """Waits until `fd` is readable or the timeout passes (never reads it)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    p.poll(max(0, int(timeout_s * 1000)) if timeout_s is not None else None)


def block_until(done, fd, drain, what, timeout=None, spin_s=50e-6):
    """Blocks the calling thread until `done()`: drains for a short spin (a completion due within microseconds is
    seen at once), then sleeps on the fd."""
    start = time.perf_counter()
    while True:
        drain()
        if done():
            return
        now = time.perf_counter()
        if timeout is not None and now - start > timeout:
            raise TimeoutError(f"{what}: not complete after {timeout} s")
        if now - start > spin_s:
            wait_fd(fd, 0.01)


class _ThreadWaiter(_Queue):
    def wait_stream(self, stream, timeout=None):
        result = []
        c = self.completion(lambda code, cr: result.append((code, cr)))
        try:
            _capi.call("stream_wait", _capi.StreamWaitArgs(stream=stream.handle, completion=c))
        except BaseException:
            self.forget(c)
            raise
        block_until(lambda: result, self.fd, self.drain, "Stream.synchronize", timeout)
        collect()
        code, cr = result[0]
        if code:
            raise errors.for_record(code, cr, f"work on stream {stream!r}")


_local = threading.local()


def thread_waiter():
    w = getattr(_local, "waiter", None)
    if w is None:
        w = _local.waiter = _ThreadWaiter()
    return w

