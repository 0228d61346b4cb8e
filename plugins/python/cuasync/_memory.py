# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Buffers (stream-ordered device memory, pooled pinned memory, imported tensors), copies, memsets, and the
exchanges: DLPack both ways and the CUDA array interface v3."""
from __future__ import annotations

import ctypes
import math
from typing import Any, Optional, Sequence, Union

from . import _capi, _completion, _dlpack, _dtypes, _fastpath, _queues, errors
from ._runtime import Runtime, Stream, as_stream

_MAX_BYTES = 1 << 63  # no allocation or copy reaches it: larger numbers are negative ones wrapped, or garbage


def _count(value, what):
    """A non-negative int (numpy's too; not a bool, not a float), below 2**63."""
    try:
        return errors.check_int(value, what, 0, _MAX_BYTES)
    except TypeError as e:
        raise errors.InvalidArgumentError(str(e)) from None


def _shape(shape, dtype, what):
    """(shape tuple, nbytes) for a shape of non-negative int extents."""
    if isinstance(shape, int) or hasattr(shape, "__index__"):
        shape = (shape,)
    else:
        try:
            shape = tuple(shape)
        except TypeError:
            raise errors.InvalidArgumentError(f"{what}: shape {shape!r} is neither an int nor a sequence of ints") \
                from None
    shape = tuple(_count(extent, f"{what}: extent") for extent in shape)
    nbytes = math.prod(shape) * _dtypes.itemsize(dtype)
    if nbytes >= _MAX_BYTES:
        raise errors.InvalidArgumentError(f"{what}: shape {shape} of {dtype} is {nbytes} bytes, past 2**63")
    return shape, nbytes


class Buffer:
    """Device or pinned memory with a dtype and a shape. Device memory is allocated and freed in the order of its
    home stream (`stream`); uses on other streams are ordered before the free, on the device. Exports `__dlpack__`
    (DLPack 1.x, the consumer's stream made to wait on the device) and `__cuda_array_interface__` (v3)."""

    def __init__(self, handle: Optional[int], pointer: int, nbytes: int, dtype: str, shape: Sequence[int],
                 runtime: Optional[Runtime], stream: Stream, kind: str, parent: Optional[Buffer] = None,
                 readonly: bool = False) -> None:
        self.handle = handle
        self.ptr = pointer
        self.nbytes = nbytes
        self.dtype = dtype
        self.shape = tuple(shape)
        self.runtime = runtime
        self.stream = stream
        self.kind = kind  # "device", "pinned" or "imported"
        self.readonly = readonly
        self._parent = parent  # a view keeps its buffer
        self._streams = [stream]  # streams that used it since it was allocated (each waited on before the free)

    # -- properties --
    @property
    def size(self) -> int:
        """The number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _dtypes.itemsize(self.dtype)

    def __len__(self):
        return self.shape[0] if self.shape else 1

    def __repr__(self):
        return f"<cuasync.Buffer {self.kind} {self.dtype}{list(self.shape)} at 0x{self.ptr:x}>"

    def _owner(self):
        return self._parent._owner() if self._parent is not None else self

    def note_use(self, stream: Stream, order: bool = True) -> None:
        """Records that work on `stream` uses the buffer (so that a free or an export waits for it). Its first use on
        a stream other than the home one is ordered, on the device, after the home stream's work so far: the
        stream-ordered allocation and what filled it there (a `zeros`, a copy in). Later writes on one stream and
        reads on another are ordered by the caller (`wait_stream`), as in PyTorch. `order=False`: no event (an
        untracked launch on a stream its framework orders, or one being captured into a graph)."""
        streams = self._owner()._streams
        if streams[-1] is not stream and stream not in streams:
            if order:
                stream.wait_stream(streams[0])
            streams.append(stream)

    def _producer_stream(self):
        """The home stream, made to wait (on the device) for every other stream that used the buffer: the one
        stream a consumer's handshake waits on."""
        producer = self._streams[0]
        for s in self._streams[1:]:
            producer.wait_stream(s)
        return producer

    def view(self, dtype: Optional[str] = None, shape: Optional[Union[int, Sequence[int]]] = None) -> Buffer:
        """The same memory with another dtype and shape (no copy)."""
        dtype = _dtypes.canonical(dtype or self.dtype)
        if shape is None:
            if self.nbytes % _dtypes.itemsize(dtype):
                raise errors.InvalidArgumentError(f"{self.nbytes} bytes are not a whole number of {dtype}")
            shape = (self.nbytes // _dtypes.itemsize(dtype),)
        shape, nbytes = _shape(shape, dtype, "view")
        if nbytes > self.nbytes:
            raise errors.InvalidArgumentError(f"shape {shape} of {dtype} needs more than the buffer's {self.nbytes} "
                                              "bytes")
        return Buffer(self.handle, self.ptr, nbytes, dtype, shape, self.runtime, self.stream, self.kind,
                      parent=self._owner(), readonly=self.readonly)

    def _check_alive(self):
        if not self._owner().handle:
            raise errors.StaleHandleError(f"{self!r} was freed")

    # -- lifetime --
    def free(self) -> None:
        """Gives the memory back (device memory in its home stream's order, after every other stream's use of it).
        Never waits on the host. A view's free does nothing: its buffer owns the memory."""
        if self._parent is not None or not self.handle or _capi.exiting:
            return
        home = self.stream
        for s in self._streams:
            if s is not home:
                try:
                    home.wait_stream(s, wait_for_staging=False)  # a free never waits on the host
                except errors.BusyError:
                    # A staged copy holds `s` (its last chunks are still to be enqueued): no event can follow them
                    # yet. The free is tried again from collect() until it can.
                    if self not in _deferred_frees:
                        _deferred_frees.append(self)
                    return
                except errors.CuasyncError:
                    pass  # that stream's context failed: nothing of it runs any more
        h, self.handle = self.handle, None
        _capi.call("buffer_free", _capi.BufferFreeArgs(buffer=h))
        _completion.collect()

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    # -- exchanges --
    def __dlpack_device__(self):
        if self.kind == "pinned":
            return (_dlpack.KDL_CUDA_HOST, 0)
        return (_dlpack.KDL_CUDA, self.runtime.device)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("cuasync exports views of its buffers; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"cuasync cannot export to device {tuple(dl_device)}")
        owner = self._owner()
        if not owner.handle:
            raise BufferError("the buffer was freed")
        # DLPack's stream argument: None means the legacy default stream (1); -1 asks for no synchronisation.
        consumer = 1 if stream is None else errors.check_int(stream, "__dlpack__: stream", -1, 1 << 63)
        producer = owner._producer_stream()
        code, bits = _dtypes.dlpack(self.dtype)
        shape = (ctypes.c_int64 * len(self.shape))(*self.shape)
        if self.ptr != owner.ptr:
            raise BufferError("only views that start at their buffer's first byte can be exported")
        a = _capi.call("buffer_export_dlpack", _capi.ExportDlpackArgs(
            buffer=owner.handle, stream=producer.handle, consumer_stream=consumer, dtype_code=code, dtype_bits=bits,
            dtype_lanes=1, ndim=len(self.shape), shape=shape))
        legacy = max_version is None or tuple(max_version)[0] < 1
        return _dlpack.capsule_for(a.managed, legacy)

    @property
    def __cuda_array_interface__(self):
        if self.kind == "pinned":
            raise AttributeError("pinned host memory has no CUDA array interface")
        self._check_alive()
        producer = self._owner()._producer_stream()
        return {"shape": self.shape, "typestr": _dtypes.typestr(self.dtype), "data": (self.ptr, self.readonly),
                "version": 3, "strides": None, "stream": producer.native}

    # -- convenience --
    def copy_from(self, src: Any, stream: Any = None) -> Any:
        """`copy(self, src, stream=stream)`: awaitable (or `.wait()`)."""
        return copy(self, src, stream=stream)

    def copy_to(self, dst: Any, stream: Any = None) -> Any:
        """`copy(dst, self, stream=stream)`: awaitable (or `.wait()`)."""
        return copy(dst, self, stream=stream)

    def tobytes(self) -> bytes:
        """The contents as bytes: copies to the host and blocks until they arrived (pinned memory: once the work of
        its streams so far is done)."""
        self._check_alive()
        if self.nbytes == 0:
            return b""
        if self.kind == "pinned":  # host memory already: after the streams' work, read it
            self._owner()._producer_stream().synchronize()
            return ctypes.string_at(self.ptr, self.nbytes)
        out = bytearray(self.nbytes)
        op = copy(out, self)
        if not isinstance(op, _completion.Pending):
            raise RuntimeError("Buffer.tobytes() blocks: inside a coroutine, await cuasync.copy(...) instead")
        op.wait()
        return bytes(out)


_deferred_frees = []  # buffers whose free waits for a staged copy to let go of a stream that used them


def _retry_deferred_frees():
    if _deferred_frees:
        for b in list(_deferred_frees):
            _deferred_frees.remove(b)
            b.free()  # deferred again while still held


_queues._sweeps.append((_deferred_frees, _retry_deferred_frees))


def empty(shape: Union[int, Sequence[int]], dtype: str = "float32", stream: Any = None,
          runtime: Optional[Runtime] = None, pinned: bool = False) -> Buffer:
    """A new buffer of `shape` and `dtype`, uninitialized: device memory allocated in `stream`'s order (default: the
    runtime's stream), or pooled pinned host memory."""
    dtype = _dtypes.canonical(dtype)
    shape, nbytes = _shape(shape, dtype, "empty")
    s = as_stream(stream, runtime)
    runtime = runtime or s.runtime or Runtime.for_device(0)
    _completion.collect()
    a = _capi.call("buffer_allocate", _capi.BufferAllocateArgs(
        runtime=runtime.handle, stream=s.handle, kind=_capi.MEMORY_PINNED if pinned else _capi.MEMORY_DEVICE,
        size=max(1, nbytes)))  # an empty buffer still has an address
    return Buffer(a.buffer, a.pointer, nbytes, dtype, shape, runtime, s, "pinned" if pinned else "device")


def zeros(shape: Union[int, Sequence[int]], dtype: str = "float32", stream: Any = None,
          runtime: Optional[Runtime] = None) -> Buffer:
    """`empty()` set to zero on `stream` (a memset enqueued, not waited for)."""
    b = empty(shape, dtype, stream, runtime)
    if b.nbytes:
        memset(b, 0, stream=b.stream)
    return b


def from_dlpack(obj: Any, stream: Any = None, runtime: Optional[Runtime] = None) -> Buffer:
    """Imports anything with `__dlpack__` (a PyTorch tensor, a CuPy or JAX array) as a Buffer, without a copy.
    `stream` is where cuasync will use it: it is passed in the handshake, so the producer makes it wait, on the
    device, for its pending writes. The producer's deleter runs once, after cuasync's work on it is done and the
    buffer freed, on a Python thread."""
    _completion.collect()
    dev_type, dev_id = obj.__dlpack_device__()
    if dev_type not in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_HOST, _dlpack.KDL_CUDA_MANAGED):
        raise errors.InvalidArgumentError(f"from_dlpack: device type {dev_type} is not CUDA memory (CUDA device, "
                                          "pinned or managed)")
    runtime = runtime or (stream.runtime if isinstance(stream, Stream) and stream.runtime else None) or \
        Runtime.for_device(dev_id if dev_type == _dlpack.KDL_CUDA else 0)
    s = as_stream(stream, runtime)
    fast = _fastpath.get()
    imported = fast.dlpack_import(obj) if fast is not None else None
    if imported is not None:
        return _from_exchange(fast, imported, s, runtime)
    handshake = s.native if dev_type != _dlpack.KDL_CUDA_HOST else None
    try:
        capsule = obj.__dlpack__(stream=handshake, max_version=(1, 0))
    except TypeError:  # a producer from before DLPack 1.0
        capsule = obj.__dlpack__(stream=handshake)
    pointer, keep, flags, tensor = _dlpack.open_capsule(capsule)
    dtype = _dtypes.from_dlpack(tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    # Drops the capsule (its deleter) once the buffer is freed: not GPU work to wait for at exit.
    released = _completion.reaper().completion(lambda code, cuda_result: keep, gpu=False)
    try:
        a = _capi.call("buffer_import_dlpack", _capi.ImportDlpackArgs(
            runtime=runtime.handle, stream=s.handle, managed=pointer, released=released))
    except BaseException:
        _completion.reaper().forget(released)  # the capsule stays the producer's
        raise
    return Buffer(a.buffer, a.pointer, a.size, dtype, shape, runtime, s, "imported",
                  readonly=bool(flags & _dlpack.FLAG_READ_ONLY))


def _from_exchange(fast, imported, s, runtime):
    """from_dlpack through the producer's DLPack C exchange API: an owning tensor without a capsule, `s` ordered
    after the producer's current work stream here (the exchange does not synchronize), the deleter called by the
    reaper once cuasync is done with the memory."""
    managed, _dev_type, _dev_id, work_stream, (code, bits, lanes), shape, flags = imported
    released = None
    try:
        dtype = _dtypes.from_dlpack(code, bits, lanes)
        if work_stream is not None:
            _order_after(s, work_stream)
        released = _completion.reaper().completion(lambda code, cuda_result: fast.delete_managed(managed), gpu=False)
        a = _capi.call("buffer_import_dlpack", _capi.ImportDlpackArgs(
            runtime=runtime.handle, stream=s.handle, managed=managed, released=released))
    except BaseException:
        if released is not None:
            _completion.reaper().forget(released)
        fast.delete_managed(managed)  # a failed import leaves the tensor ours to delete
        raise
    return Buffer(a.buffer, a.pointer, a.size, dtype, shape, runtime, s, "imported",
                  readonly=bool(flags & _dlpack.FLAG_READ_ONLY))


# ---- pointers of what Python hands us ------------------------------------------------------------------------------

def _host_span(obj, writable):
    """(address, nbytes, keep) of host memory: bytes-like objects and arrays with __array_interface__."""
    ai = getattr(obj, "__array_interface__", None)
    if ai is not None:
        if ai.get("strides") is not None:
            raise errors.InvalidArgumentError("host array is not contiguous")
        ptr, ro = ai["data"]
        if writable and ro:
            raise errors.InvalidArgumentError("the destination host array is read-only")
        n = math.prod(ai["shape"]) * int(ai["typestr"][2:])
        return ptr, n, obj
    mv = memoryview(obj)
    if not mv.contiguous:
        raise errors.InvalidArgumentError("host buffer is not contiguous")
    if mv.readonly:
        if writable:
            raise errors.InvalidArgumentError("the destination host buffer is read-only")
        if isinstance(obj, bytes):
            return ctypes.cast(ctypes.c_char_p(obj), ctypes.c_void_p).value or 0, mv.nbytes, obj
        copy_ = bytearray(mv)  # other read-only buffers: ctypes cannot take their address
        mv = memoryview(copy_)
        obj = copy_
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv.cast("B")) if mv.nbytes else None
    return (ctypes.addressof(arr) if arr is not None else 0), mv.nbytes, (obj, arr)


def _device_span(obj, stream, writable):
    """(address, nbytes, keep) of device memory: a Buffer, a PyTorch tensor, or the CUDA array interface (whose
    producer stream is made to come first on `stream`, on the device); None when `obj` is not device memory."""
    if isinstance(obj, Buffer):
        if not (obj._parent if obj._parent is not None else obj).handle:
            obj._check_alive()
        if writable and obj.readonly:
            raise errors.InvalidArgumentError("the destination buffer is read-only (imported as such)")
        obj.note_use(stream)
        return obj.ptr, obj.nbytes, obj
    if hasattr(obj, "data_ptr") and getattr(obj, "is_cuda", False):  # a PyTorch tensor
        if not obj.is_contiguous():
            raise errors.InvalidArgumentError("tensor is not contiguous")
        from ._jit import _torch_current_stream
        _order_after(stream, _torch_current_stream(obj.device))
        return obj.data_ptr(), obj.numel() * obj.element_size(), obj
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        if not _c_contiguous(cai["shape"], cai.get("strides"), int(cai["typestr"][2:])):
            raise errors.InvalidArgumentError(f"device array is not contiguous (strides {cai.get('strides')})")
        producer = cai.get("stream")
        if producer is not None:  # v3: the producer's stream, to be ordered before our use (None: nothing pending)
            _order_after(stream, producer)
        ptr, ro = cai["data"]
        if writable and ro:
            raise errors.InvalidArgumentError("the destination device array is read-only")
        return ptr, math.prod(cai["shape"]) * int(cai["typestr"][2:]), obj
    return None


def _c_contiguous(shape, strides, itemsize):
    """True for strides None (contiguous by the interface's rule) or equal to a C-contiguous array's (extents of 1
    may have any stride)."""
    if strides is None:
        return True
    expected = itemsize
    for extent, stride in zip(reversed(tuple(shape)), reversed(tuple(strides))):
        if extent != 1 and stride != expected:
            return False
        expected *= extent
    return True


_adopted = {}  # (runtime, CUstream) -> the cuasync Stream adopting a framework's stream, made once


def _adopt_cached(producer, runtime):
    s = _adopted.get((runtime, producer))
    if s is None:
        if len(_adopted) >= 256:  # streams of frameworks come from pools; a bound all the same
            _adopted.clear()
        s = _adopted[(runtime, producer)] = Stream.adopt(producer, runtime)
    return s


def _order_after(stream, producer):
    """Makes `stream` wait, on the device, for the work enqueued so far on a framework's stream `producer` (a
    CUstream as an int; 0, 1 and 2 are the default streams of the stream's context). The framework's stream is
    adopted once (cached), and the fast path records and waits on the event in one call."""
    if producer == stream._native:  # None for a stream never handed out: no framework's stream can be it
        return
    other = _adopt_cached(producer, stream.runtime)
    fast = _fastpath.get()
    if fast is None or fast.stream_order(stream.handle, other.handle) == errors.BUSY:
        stream.wait_stream(other)  # a staged copy holds `other`: this waits for it, as without the fast path


def _span(obj, stream, writable):
    if isinstance(obj, bool):
        raise errors.InvalidArgumentError(f"{obj!r} is not memory (an address is an int, a bool is not)")
    if isinstance(obj, int):
        if obj <= 0 or obj >= 1 << 64:
            raise errors.InvalidArgumentError(f"address {obj:#x} is not a pointer")
        return obj, None, None
    d = _device_span(obj, stream, writable)
    return d if d is not None else _host_span(obj, writable)


def _default_stream(*objs):
    for o in objs:
        if isinstance(o, Buffer):
            return o.stream
    return Runtime.for_device(0).default_stream


def copy(dst: Any, src: Any, nbytes: Optional[int] = None, stream: Any = None) -> Any:
    """Copies `src` to `dst` on `stream` (host to device, device to host, device to device); either side may be a
    Buffer, a tensor or array (CUDA array interface, PyTorch, numpy, bytes-like) or an address. Never waits for the
    GPU: pageable host memory is staged through pinned memory by cuasync. `await` it in a coroutine, `.wait()` it
    outside one; host memory is kept alive until the copy is done."""
    s = as_stream(stream) if stream is not None else _default_stream(dst, src)
    dptr, dn, dkeep = _span(dst, s, True)
    sptr, sn, skeep = _span(src, s, False)
    known = [n for n in (dn, sn) if n is not None]
    if nbytes is None:
        if not known:
            raise errors.InvalidArgumentError("copy: pass nbytes when both sides are addresses")
        nbytes = min(known)
        if len(known) == 2 and dn != sn:
            raise errors.InvalidArgumentError(f"copy: destination has {dn} bytes, source {sn}: pass nbytes to copy "
                                              "part of one")
    elif any(_count(nbytes, "copy: nbytes") > n for n in known):
        raise errors.InvalidArgumentError(f"copy: {nbytes} bytes do not fit ({dn} at the destination, {sn} at the "
                                          "source)")
    else:
        _count(nbytes, "copy: nbytes")  # two addresses: nothing to check it against
    if nbytes == 0:
        raise errors.InvalidArgumentError("copy: nothing to copy (0 bytes)")
    args = _capi.CopyArgs(stream=s.handle, dst=dptr, src=sptr, size=nbytes)

    def enqueue(queue, token):
        args.completion.queue, args.completion.token = queue, token
        return _capi.call_code("copy", args)
    return _completion.issue(s, lambda: f"copy of {nbytes} bytes on {s!r}", enqueue, keep=(dkeep, skeep, s))


def memset(dst: Any, value: int, nbytes: Optional[int] = None, stream: Any = None) -> Any:
    """Sets `nbytes` bytes of device memory to `value` (a byte) on `stream`; awaitable like `copy`."""
    s = as_stream(stream) if stream is not None else _default_stream(dst)
    ptr, n, keep = _span(dst, s, True)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 255:
        raise errors.InvalidArgumentError(f"memset: value {value!r} is not a byte (an int in [0, 255])")
    if nbytes is None:
        if n is None:
            raise errors.InvalidArgumentError("memset: pass nbytes for an address")
        nbytes = n
    elif _count(nbytes, "memset: nbytes") > (n if n is not None else nbytes):
        raise errors.InvalidArgumentError(f"memset: {nbytes} bytes do not fit in the destination's {n}")
    if nbytes == 0:
        raise errors.InvalidArgumentError("memset: nothing to set (0 bytes)")
    args = _capi.MemsetArgs(stream=s.handle, dst=ptr, value=value, size=nbytes)

    def enqueue(queue, token):
        args.completion.queue, args.completion.token = queue, token
        return _capi.call_code("memset", args)
    return _completion.issue(s, lambda: f"memset of {nbytes} bytes on {s!r}", enqueue, keep=(keep, s))
