"""Completions: C completion queues (eventfd) drained on Python's own threads, so no Python ever runs on a driver or
cuasync thread.

- `reaper()`: the process's queue for work nobody awaits (references held until the GPU is done with them, tensors
  imported by DLPack given back). It is drained under a lock by whichever thread calls into cuasync next, by every
  event loop that uses cuasync (a reader on its fd), by `collect()` and by blocking waits.
- `for_loop(loop)`: one queue per asyncio event loop, watched with `loop.add_reader` (the default loop and uvloop).
  Operations that find their stream full (BUSY) wait in a per-stream backlog and are issued, in call order, as places
  come back. When the loop goes, the references of its unfinished operations move to the reaper, so memory the GPU
  still writes is never freed under it.
- `thread_waiter()`: a queue per thread for blocking waits (`Stream.synchronize`).
"""
import asyncio
import collections
import ctypes
import itertools
import os
import select
import threading
import time
import weakref

from . import _capi, errors

_CAPACITY = 64
# After activity (an operation issued, a completion seen) an event loop drains its queue on every iteration for this
# long before it relies on the fd alone: the fd's wake-up (poller -> eventfd -> epoll -> loop) costs ~10-20 us, a
# drain ~1 us. The loop stays free meanwhile (other handlers run between drains); cf. the C++ executor window.
SPIN_S = float(os.environ.get("CUASYNC_PY_SPIN_US", "200")) * 1e-6
# The longest an idle loop (asyncio's ready queue empty) drains without yielding: long enough to catch a short kernel's
# completion without another loop iteration, short beside asyncio's own timer granularity (~1 ms).
_IDLE_SPIN_S = float(os.environ.get("CUASYNC_PY_IDLE_SPIN_US", "50")) * 1e-6
_tokens = itertools.count(1)  # next() is atomic under the GIL


class _Queue:
    """A C queue with an fd; each token maps to a handler(code, cuda_result) run by the thread that drains."""

    def __init__(self):
        self.handle = _capi.call("queue_create", _capi.QueueCreateArgs(flags=_capi.QUEUE_FD)).queue
        self.fd = _capi.call("queue_fd", _capi.QueueFdArgs(queue=self.handle)).fd
        self._records = (_capi.CompletionRecord * _CAPACITY)()
        self._drain_args = _capi.QueueDrainArgs(queue=self.handle, records=self._records, capacity=_CAPACITY)
        self._drain_args.struct_size = ctypes.sizeof(self._drain_args)
        self._drain_address = ctypes.addressof(self._drain_args)
        self._drain_call = _capi.function("queue_drain")
        self._handlers = {}

    def completion(self, handler):
        """A `cuasync_completion` that runs `handler(code, cuda_result)` when drained; `forget` it if unused."""
        return _capi.Completion(queue=self.handle, token=self.token(handler))

    def token(self, handler):
        """A token of this queue that runs `handler(code, cuda_result)` when drained (`forget` it if unused)."""
        token = next(_tokens)
        self._handlers[token] = handler
        return token

    def forget(self, completion):
        self._handlers.pop(completion if isinstance(completion, int) else completion.token, None)

    def pending(self):
        return len(self._handlers)

    def drain(self):
        """Runs the handlers of every queued record; returns how many ran. The fd protocol: drain until a call
        returns fewer records than asked for."""
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

    def destroy(self):
        if self.handle and not _capi.exiting:
            _capi.call("queue_destroy", _capi.QueueDestroyArgs(queue=self.handle))
        self.handle = None


class _Reaper(_Queue):
    """The process's queue for work nobody awaits; drained under a lock from any thread."""

    def __init__(self):
        super().__init__()
        self._lock = threading.Lock()

    def drain(self):
        if not self._handlers:
            return 0
        with self._lock:
            return super().drain()

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


def collect():
    """Runs what finished work left to do (references dropped, imported tensors given back). Cheap; cuasync calls it
    itself on most calls."""
    if _reaper is not None:
        _reaper.drain()


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


# ---- asyncio -------------------------------------------------------------------------------------------------------

def _settle(fut, code, cuda_result, what, result):
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

    def __call__(self, code, cuda_result):
        _settle(self.fut, code, cuda_result, self.what, self.result)


class LoopCompletions(_Queue):
    """The completion queue of one asyncio event loop."""

    def __init__(self, loop):
        super().__init__()
        self._loop = weakref.ref(loop)
        self._create_future = loop.create_future
        self._backlogs = {}  # stream handle -> deque of _Op waiting for a place
        self._retry_armed = False
        self._spinning = False
        self._last_activity = 0.0
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
            self._loop().call_soon(self._spin)

    def _spin(self):
        if self.handle is None:
            self._spinning = False
            return
        now = time.perf_counter()
        ran = self.drain()
        if not ran and self._handlers:
            # Nothing else to run on the loop (asyncio's ready queue is empty): drain in a tight loop for a moment,
            # instead of a loop iteration (a select call) per drain. Bounded, so timers and I/O wait at most that.
            ready = getattr(self._loop(), "_ready", None)
            if ready is not None and not ready:
                until = now + _IDLE_SPIN_S
                while not ran and time.perf_counter() < until:
                    ran = self.drain()
        if ran:
            self._flush_backlogs()
            self._last_activity = now
        if self._handlers and now - self._last_activity < SPIN_S:
            self._loop().call_soon(self._spin)
        else:
            self._spinning = False

    def submit(self, stream, issue, keep, what, result=None):
        """Issues `issue(queue, token) -> 0 | BUSY` now (errors raise here) or, behind a BUSY stream, later; returns
        the future of its completion."""
        op = _Op(stream, issue, self._create_future(), keep, what, result)
        if self._backlogs and stream.handle in self._backlogs:
            self._backlogs[stream.handle].append(op)
        elif not self._issue(op, raise_errors=True):
            self._backlogs.setdefault(stream.handle, collections.deque()).append(op)
            self._arm_retry()
        self._activity()
        return op.fut

    def _issue(self, op, raise_errors):
        token = next(_tokens)
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
        # The loop was closed and collected: its futures are gone, but the GPU may still use memory their
        # operations hold. Hand those references to the reaper until each stream's work is done, then drop the queue.
        if _capi.exiting:
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


_loops = weakref.WeakKeyDictionary()


_last = (lambda: None, None)  # the last (loop, its completions) looked up: most calls come from one loop


def for_loop(loop):
    global _last
    last = _last  # one read: another thread may replace it meanwhile
    if last[0]() is loop:
        return last[1]
    lc = _loops.get(loop)
    if lc is None:
        lc = _loops[loop] = LoopCompletions(loop)
    _last = (weakref.ref(loop), lc)
    return lc


running_loop = asyncio._get_running_loop  # this thread's running loop or None: a C-level lookup


# ---- operations issued outside an event loop -----------------------------------------------------------------------

class Pending:
    """An operation issued outside an event loop. `wait()` blocks until it completed (and raises its error)."""

    __slots__ = ("_stream", "_state", "what")

    def __init__(self, stream, what, tracked):
        self._stream = stream
        self.what = what
        self._state = [] if tracked else None  # tracked: [ (code, cuda_result) ] once complete

    def _token(self, keep):
        state = self._state

        def done(code, cuda_result):
            state.append((code, cuda_result))
            return keep
        return reaper().token(done)

    def done(self):
        collect()
        return bool(self._state)

    def wait(self, timeout=None):
        if self._state is None:  # no completion of its own: the stream's completion covers it
            thread_waiter().wait_stream(self._stream, timeout)
            return
        r = reaper()
        block_until(lambda: self._state, r.fd, r.drain, self.what, timeout)
        code, cuda_result = self._state[0]
        if code:
            raise errors.for_record(code, cuda_result, self.what)

    def __await__(self):
        raise RuntimeError(f"{self.what} was issued outside an event loop: call .wait(), or issue it inside a "
                           "coroutine to await it")
        yield  # pragma: no cover


def issue(stream, what, call, keep=None, result=None, tracked=True):
    """Issues an operation: `call(queue, token) -> 0 | BUSY` (0, 0: no completion). Inside a running event loop it returns an awaitable
    future (a BUSY stream queues the operation behind its earlier ones); outside one, it retries a BUSY stream with
    short sleeps, like a driver whose queue is full, and returns a `Pending`. `keep` is held until the GPU is done."""
    loop = running_loop()
    if loop is not None and tracked:
        return for_loop(loop).submit(stream, call, keep, what, result)
    collect()
    p = Pending(stream, what, tracked and keep is not None)
    delay = 0.0
    deadline = None
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
        now = time.perf_counter()
        deadline = deadline or now + 60.0
        if now > deadline:
            raise errors.BusyError(f"{what}: the stream stayed full for 60 s")
        time.sleep(delay)
        delay = min(max(delay * 2, 20e-6), 1e-3)
        collect()


def host_token():
    """A host completion: `complete()` it from any thread; awaitable in the loop that made it (or `.wait()`)."""
    return HostToken()


class HostToken:
    """Host work that completes through the same queues as GPU work (the asyncio plumbing without a GPU)."""

    def __init__(self):
        loop = running_loop()
        self._state = []
        if loop is not None:
            lc = for_loop(loop)
            self._future = loop.create_future()
            fut = self._future
            c = lc.completion(lambda code, cr: _settle(fut, code, cr, "host token", None))
            queue = lc
        else:
            self._future = None
            state = self._state
            c = reaper().completion(lambda code, cr: state.append((code, cr)))
            queue = reaper()
        try:
            self.handle = _capi.call("host_token_create", _capi.HostTokenCreateArgs(completion=c)).token
        except BaseException:
            queue.forget(c)
            raise
        self._fd = queue.fd

    def complete(self, error_code=0):
        """Completes it (from any thread), with CUASYNC_OK or an error code. Once."""
        h, self.handle = self.handle, None
        if not h:
            raise errors.InvalidArgumentError("host token completed twice")
        _capi.call("host_token_complete", _capi.HostTokenCompleteArgs(token=h, code=error_code))

    def __await__(self):
        if self._future is None:
            raise RuntimeError("this host token was made outside an event loop: call .wait()")
        return self._future.__await__()

    def wait(self, timeout=None):
        r = reaper()
        block_until(lambda: self._state, r.fd, r.drain, "host token", timeout)
        code, cr = self._state[0]
        if code:
            raise errors.for_record(code, cr, "host token")
