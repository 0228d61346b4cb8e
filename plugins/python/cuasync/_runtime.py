# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Devices, runtimes, streams and events."""
from __future__ import annotations

import threading
from typing import Any, Optional, Tuple

from . import _capi, _completion, errors


def device_count() -> int:
    """The number of CUDA devices (raises NoDriverError without a usable driver)."""
    return _capi.call("device_count", _capi.DeviceCountArgs()).count


class Runtime:
    """A cuasync runtime of one device, on its primary context (the one PyTorch, JAX and CuPy use), or on an adopted
    CUcontext. Each `Runtime(...)` is a new one with pools of its own (streams, pinned memory, staging); the context,
    its events and admission bounds are shared with every other runtime on it. `Runtime.for_device(n)` is the
    process's shared one."""

    _shared = {}
    _shared_lock = threading.Lock()

    def __init__(self, device: int = 0, context: Optional[int] = None) -> None:
        errors.check_int(device, "Runtime: device", 0, 1 << 31)
        if context is not None:
            errors.check_int(context, "Runtime: context (a CUcontext as an int)", 1, 1 << 64)
        a = _capi.call("runtime_create", _capi.RuntimeCreateArgs(device=device, context=context))
        self.handle = a.runtime
        self.device = device
        self._default_stream = None
        self._default_streams = {}  # the context's legacy (1) and per-thread (2) default streams, once adopted

    @classmethod
    def for_device(cls, device: int = 0) -> Runtime:
        """The process's shared runtime of `device` (created on first use, on its primary context)."""
        r = cls._shared.get(device)
        if r is None:
            with cls._shared_lock:
                r = cls._shared.get(device)
                if r is None:
                    r = cls._shared[device] = cls(device)
        return r

    @property
    def default_stream(self) -> Stream:
        """A non-blocking stream of this runtime's own (never the legacy default stream)."""
        if self._default_stream is None:
            self._default_stream = Stream(self)
        return self._default_stream

    def admission_limits(self) -> Tuple[int, int]:
        """The admission bounds of this runtime's context, `(per_stream, per_context)`: how many copies, memsets and
        tracked launches may be in flight at once on one stream and on the context before a call raises BusyError
        (0: no bound). Shared by every runtime on the context. Needs a library of ABI 1.2."""
        a = _capi.call("runtime_admission_get", _capi.AdmissionLimitsArgs(runtime=self.handle))
        return (a.per_stream, a.per_context)

    def set_admission_limits(self, per_stream: int, per_context: int) -> None:
        """Sets the admission bounds of this runtime's context (every runtime on it shares them) for the operations
        admitted from now on. 0 means no bound; above the defaults (64, 500), or unbounded, a call can block while the
        driver's queue is full. A non-zero `per_stream` above a non-zero `per_context` raises InvalidArgumentError."""
        per_stream = errors.check_int(per_stream, "set_admission_limits: per_stream", 0, 1 << 32)
        per_context = errors.check_int(per_context, "set_admission_limits: per_context", 0, 1 << 32)
        _capi.call("runtime_admission_set", _capi.AdmissionLimitsArgs(runtime=self.handle, per_stream=per_stream,
                                                                      per_context=per_context))

    def __repr__(self):
        return f"<cuasync.Runtime device={self.device}>"

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h:
            _capi.release("runtime_destroy", _capi.RuntimeDestroyArgs(runtime=h))


def _native_handle(obj):
    """The CUstream of a stream-like object: __cuda_stream__, a PyTorch stream, a CuPy stream, or an int."""
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        version, handle = proto() if callable(proto) else proto
        return int(handle)
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        h = getattr(obj, attr, None)
        if isinstance(h, int):
            return h
    if isinstance(obj, int) and not isinstance(obj, bool):
        return errors.check_int(obj, "a CUstream handle", 0, 1 << 64)
    raise TypeError(f"not a CUDA stream: {type(obj).__name__} (expected __cuda_stream__, a PyTorch or CuPy stream, "
                    "or a CUstream handle as an int)")


class Stream:
    """A cuasync stream: created (non-blocking) in a runtime, or a framework's stream adopted (`Stream.adopt`).
    Implements `__cuda_stream__`. Work issued on it inside a coroutine is awaitable."""

    def __init__(self, runtime: Optional[Runtime] = None, priority: int = 0) -> None:
        """A new non-blocking stream of `runtime` (default: device 0's shared runtime) at `priority`."""
        self._init(runtime, priority, None, None)

    @classmethod
    def _wrap(cls, runtime, native, owner):
        """A Stream over the native CUstream `native` (not created here), keeping `owner` alive with it."""
        s = cls.__new__(cls)
        s._init(runtime, 0, native, owner)
        return s

    def _init(self, runtime, priority, _native, _owner):
        if runtime is not None and not isinstance(runtime, Runtime):
            raise TypeError(f"Stream: runtime must be a cuasync.Runtime, not {type(runtime).__name__} ({runtime!r})")
        errors.check_int(priority, "Stream: priority", -(1 << 31), 1 << 31)
        if _native is None:
            runtime = runtime or Runtime.for_device(0)
        # A default stream (1, 2) is one of a context's: it is taken in the runtime's; other native streams carry
        # their context.
        in_runtime = _native is None or _native in (1, 2)
        a = _capi.call("stream_create", _capi.StreamCreateArgs(runtime=runtime.handle if in_runtime else None,
                                                               native=_native, priority=priority))
        self.handle = a.stream
        self.runtime = runtime
        self._owner = _owner  # an adopted stream's framework object, kept alive with it
        # A stream cuasync created keeps its CUstream to itself until asked (`native`, `__cuda_stream__`, a hash, an
        # export): its holder could then capture it, so each tracked launch on it asks the driver (cuStreamIsCapturing,
        # before the launch) whether it is being captured; one never handed out skips that.
        self._native = self._context = None
        if _native is not None:
            self._hand_out()

    def _hand_out(self):
        n = _capi.call("stream_native", _capi.StreamNativeArgs(stream=self.handle))
        self._native, self._context = n.native or 0, n.context or 0

    @property
    def native(self) -> int:
        """The CUstream, as an int. Of a stream cuasync created, asking hands it out: from then on each tracked launch
        on it first asks the driver whether it is being captured (~0.3 us), as its holder may capture it."""
        if self._native is None:
            self._hand_out()
        return self._native

    @native.setter
    def native(self, value: int) -> None:
        self._native = value

    @property
    def context(self) -> int:
        """The stream's CUcontext, as an int (asking hands the stream out, as `native` does)."""
        if self._context is None:
            self._hand_out()
        return self._context

    @context.setter
    def context(self, value: int) -> None:
        self._context = value

    @classmethod
    def adopt(cls, obj: Any, runtime: Optional[Runtime] = None) -> Stream:
        """Wraps a framework's stream (anything `__cuda_stream__`, torch.cuda.Stream, cupy.cuda.Stream, an int
        CUstream). Its context is read from the stream. The default streams (0 or 1: the legacy one, PyTorch's and
        CuPy's default; 2: the per-thread one) belong to a context, so they are taken in `runtime`'s (default:
        device 0's); work on the legacy default stream serializes with every blocking stream of its context."""
        handle = _native_handle(obj)
        if handle in (0, 1, 2):
            runtime = runtime or Runtime.for_device(0)
            key = 2 if handle == 2 else 1
            s = runtime._default_streams.get(key)
            if s is None:
                s = runtime._default_streams[key] = cls._wrap(runtime, key, key)
            return s
        return cls._wrap(runtime, handle, None if isinstance(obj, int) else obj)

    def __cuda_stream__(self):
        return (0, self.native)

    def wait(self) -> Any:
        """Completes when everything enqueued so far has completed: `await stream.wait()` in a coroutine (the event
        loop stays free); outside one, use synchronize()."""
        return _completion.issue(self, lambda: f"wait on {self!r}", lambda queue, token: _capi.call_code(
            "stream_wait", _capi.StreamWaitArgs(stream=self.handle, completion=_capi.Completion(queue, token))),
            keep=self)

    def synchronize(self, timeout: Optional[float] = None) -> None:
        """Blocks this thread until the stream's work so far has completed (raises its error)."""
        _completion.thread_waiter().wait_stream(self, timeout)

    def record(self, wait_for_staging: bool = True) -> Event:
        """A pooled event recorded on the stream now. While a staged copy (a pageable copy above the staging
        threshold) is still enqueueing its chunks on the stream, no event can follow them yet: this waits, sleeping,
        until it has (like the driver's own pageable copy, which returns once the data is staged), or raises
        BusyError at once with `wait_for_staging=False`."""
        return Event(self, wait_for_staging)

    def wait_event(self, event: Event) -> None:
        """Makes this stream wait, on the device, for `event`."""
        _capi.call("event_wait", _capi.EventWaitArgs(event=event.handle, stream=self.handle))

    def wait_stream(self, other: Stream, wait_for_staging: bool = True) -> None:
        """Makes this stream wait, on the device, for the work enqueued on `other` so far (see record() for a staged
        copy still enqueueing on `other`)."""
        self.wait_event(other.record(wait_for_staging))

    def __eq__(self, other):
        if not isinstance(other, Stream):
            return False
        if self._native is None or other._native is None:  # one never handed out: nobody else can name its CUstream
            return self is other or self.handle == other.handle
        return other._native == self._native

    def __hash__(self):
        return hash(self.native)

    def __repr__(self):
        if self._native is None:
            return f"<cuasync.Stream (cuasync's, not handed out; handle 0x{self.handle or 0:x})>"
        return f"<cuasync.Stream 0x{self._native:x}{' adopted' if self._owner is not None else ''}>"

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h:
            _capi.release("stream_destroy", _capi.StreamDestroyArgs(stream=h))


class Event:
    """A pooled, timing-disabled event recorded on a stream."""

    def __init__(self, stream: Stream, wait_for_staging: bool = True) -> None:
        args = _capi.EventRecordArgs(stream=stream.handle)
        backoff = _completion.BusyBackoff()
        while _capi.call_code("event_record", args) == errors.BUSY:  # a staged copy holds the stream
            if not wait_for_staging:
                raise errors.BusyError(f"event record on {stream!r}: a staged copy is still enqueueing its chunks")
            backoff.wait(lambda: f"event record on {stream!r}: a staged copy held the stream for 60 s")
        self.handle = args.event
        self.stream = stream

    def query(self) -> bool:
        """True when the recorded work has completed (raises its error if it failed). Never blocks."""
        return bool(_capi.call("event_query", _capi.EventQueryArgs(event=self.handle)).done)

    def __del__(self):
        h, self.handle = getattr(self, "handle", None), None
        if h:
            _capi.release("event_destroy", _capi.EventDestroyArgs(event=h))


def as_stream(stream, runtime=None):
    """A cuasync Stream for `stream`: a Stream, a framework's stream (adopted), or None (the runtime's default)."""
    if stream is None:
        return (runtime or Runtime.for_device(0)).default_stream
    if isinstance(stream, Stream):
        return stream
    return Stream.adopt(stream, runtime)
