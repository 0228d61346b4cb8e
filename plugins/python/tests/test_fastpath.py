# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The compiled fast path (cuasync._fast) against the ctypes path, without a GPU: launch blobs packed the same way,
the same fallbacks and errors, the completion drains, and the DLPack C exchange API through a producer written here
with ctypes. CI runs this suite with CUASYNC_PYTHON_FAST=1 (the extension required) and =0 (ctypes alone)."""
import ctypes
import os
import struct
import time

import pytest

import cuasync
from cuasync import _capi, _fastpath, _jit, _queues, errors
from cuasync._memory import Buffer

MODE = os.environ.get("CUASYNC_PYTHON_FAST", "")
fast = _fastpath.get()
needs_fast = pytest.mark.skipif(fast is None, reason="cuasync._fast is not in use (not built, or "
                                "CUASYNC_PYTHON_FAST=0)")


def test_mode_is_what_the_environment_asks():
    if MODE == "0":
        assert fast is None and not _fastpath.enabled()
    elif MODE == "1":
        assert fast is not None and fast.__file__.endswith(".abi3.so")
        assert fast.LIMITED_API == 0x030A0000 and fast.ABI_MAJOR == _capi.ABI_MAJOR


class _Stub:
    """What a launch reads of a stream: its handle."""
    handle = 0x5151
    native = 0x7777
    runtime = None


def _stream():
    """A cuasync Stream whose handle the library never made (its calls fail as a stale handle)."""
    s = cuasync.Stream.__new__(cuasync.Stream)
    s.handle, s.native, s.context, s.runtime, s._owner = 0, 0x7777, 0, None, None
    return s


def _kernel(sizes, handle=0x4b4b):
    return _jit.Kernel(None, handle, "k", tuple(sizes))


def _decode(blob):
    """(header fields, [(size, value bytes)]) of a launch blob, reading its kernel_arg array's pointers."""
    head = struct.unpack_from("<QQQ3I3II4xQQQQQQI4xQ", blob, 0)
    if isinstance(blob, bytearray):
        base = ctypes.addressof((ctypes.c_char * len(blob)).from_buffer(blob))
    else:  # the ctypes path's blob
        base = ctypes.addressof(blob)
    args, n = head[10], head[11]
    assert n == 0 or args == base + 120  # the argument array right after the header, inside the blob
    values = []
    for i in range(n):
        ptr, size = struct.unpack_from("<QQ", blob, 120 + 16 * i)
        assert base <= ptr < base + len(blob)
        values.append((size, ctypes.string_at(ptr, size)))
    return head[:10] + head[11:], values


CASES = [
    ((8, 4, 8, 1, 2), (1, 2.5, -3, 255, -32768)),
    ((8, 8, 4), (2**64 - 1, -(2**63), 2**32 - 1)),
    ((4, 8, 1), (True, 1e300, False)),
    ((8,), (0,)),
    ((), ()),
]


@needs_fast
@pytest.mark.parametrize("sizes,args", CASES)
def test_fast_pack_matches_the_ctypes_layout(sizes, args):
    k = _kernel(sizes)
    for grid, block, shared, flags in ((3, 128, 0, 0), ((2, 3), (32, 4, 2), 4096, _capi.LAUNCH_UNTRACKED)):
        blob, uses = k._fast.pack(_Stub, grid, block, shared, flags, args)
        assert uses is None
        ref, _, _ = k._blob(_Stub, grid, block, args, shared, flags)
        assert _decode(blob) == _decode(ref)


@needs_fast
@pytest.mark.parametrize("sizes,args", [
    ((8,), (1, 2)),                 # a count mismatch
    ((1,), (256,)),                 # out of range
    ((4,), (-(2**31) - 1,)),
    ((8,), (2**64,)),
    ((4,), (1e39,)),                # past a float's range
    ((2,), (1.5,)),                 # a half: packed by the package
    ((8,), (b"12345678",)),         # bytes, ctypes values, numpy scalars: the general path
    ((8,), (ctypes.c_uint64(3),)),
    ((4,), (object(),)),
    ((8,), (object(),)),
])
def test_fast_pack_leaves_the_rest_to_the_general_path(sizes, args):
    assert _kernel(sizes)._fast.pack(_Stub, 1, 1, 0, 0, args) is NotImplemented


@needs_fast
def test_fast_pack_leaves_bad_configurations_to_the_general_path():
    f = _kernel((8,))._fast
    for grid, block, shared in ((0, 1, 0), (1, 2**31, 0), ((1, 1, 1, 1), 1, 0), (1, 1, -1), (1, 1, 2**32),
                                (1.0, 1, 0), (True, 1, 0), ([1], 1, 0)):
        assert f.pack(_Stub, grid, block, shared, 0, (1,)) is NotImplemented, (grid, block, shared)


def test_bad_arguments_raise_the_same_way_on_both_paths():
    k = _kernel((8, 4))
    with pytest.raises(errors.InvalidArgumentError, match="takes 2 parameter"):
        k.launch(_stream(), 1, 1, 1)
    with pytest.raises(errors.InvalidArgumentError, match="does not fit in 4 bytes"):
        k.launch(_stream(), 1, 1, 1, 2**40)
    with pytest.raises(errors.InvalidArgumentError, match="must be unsigned 32-bit"):
        k.launch(_stream(), 1, 1, 1, 2, shared_memory=-1)


def _fake_buffer(pointer, handle=1):
    b = Buffer(handle, pointer, 64, "float32", (16,), None, _stream(), "device")
    return b


@needs_fast
def test_fast_pack_reports_buffers_and_leaves_freed_ones_to_the_package():
    b = _fake_buffer(0xDEAD0000)
    view = b.view("uint8")
    try:
        blob, uses = _kernel((8, 8, 4))._fast.pack(_Stub, 1, 1, 0, 0, (b, view, 7))
        assert _decode(blob)[1] == [(8, struct.pack("<Q", 0xDEAD0000))] * 2 + [(4, struct.pack("<I", 7))]
        assert uses == ((0, 1), (), ())
        # Last used on the launch's stream already: nothing for the package to note.
        assert _kernel((8, 8, 4))._fast.pack(b.stream, 1, 1, 0, 0, (b, view, 7))[1] is None
        b.handle = None  # freed: its view too
        assert _kernel((8,))._fast.pack(_Stub, 1, 1, 0, 0, (view,)) is NotImplemented
        with pytest.raises(errors.StaleHandleError):
            _kernel((8,)).launch(_stream(), 1, 1, view)
    finally:
        b.handle = None


class _ArrayInterface:
    def __init__(self, ptr, stream):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (ptr, False), "version": 3,
                                         "stream": stream}


class _DataPtr:
    def data_ptr(self):
        return 0xABC0


@needs_fast
def test_fast_pack_takes_framework_pointers_with_their_producer_streams():
    blob, uses = _kernel((8, 8, 8))._fast.pack(_Stub, 1, 1, 0, 0, (_ArrayInterface(0x1000, 0x99), _DataPtr(),
                                                               _ArrayInterface(0x2000, None)))
    assert [v for _, v in _decode(blob)[1]] == [struct.pack("<Q", p) for p in (0x1000, 0xABC0, 0x2000)]
    assert uses == ((), (0, 1, 2), (0x99, False, None))


@needs_fast
@pytest.mark.parametrize("sizes,args", CASES)
def test_launch_now_hands_back_the_blob_pack_makes_when_something_is_to_be_ordered(sizes, args):
    # Framework memory to order after: launch_now launches nothing and returns its stack blob copied out, its pointers
    # moved into the copy (_decode checks they point inside it), the same as pack()'s, with the same uses.
    k = _kernel(tuple(sizes) + (8,))
    full = tuple(args) + (_ArrayInterface(0x1000, 0x99),)
    blob, uses = k._fast.launch_now(_Stub, (2, 3), 64, 128, full)
    ref, ref_uses = k._fast.pack(_Stub, (2, 3), 64, 128, 0, full)
    assert _decode(blob) == _decode(ref) and uses == ref_uses == ((), (len(args),), (0x99,))


def test_launch_errors_from_the_library_raise_on_both_paths():
    # No such kernel handle: the library refuses it (no driver needed), through fire() or through ctypes.
    with pytest.raises(errors.CuasyncError):
        _kernel((8,), handle=0x1234567).launch_untracked(_stream(), 1, 1, 5)
    with pytest.raises(errors.CuasyncError):
        _kernel((8,), handle=0x1234567).launch(_stream(), 1, 1, 5)


@needs_fast
def test_fire_refuses_what_pack_did_not_make():
    with pytest.raises(ValueError, match="not a blob"):
        _kernel(())._fast.fire(bytearray(40), 0, 0)
    with pytest.raises(TypeError):
        _kernel(())._fast.fire(b"x" * 120, 0, 0)


# ---- completion drains -----------------------------------------------------------------------------------------------

def _complete_all(q, handlers, code=0):
    """Host tokens of `q` running `handlers`, all completed (delivered to the queue by cuasync's thread)."""
    tokens = [_capi.call("host_token_create", _capi.HostTokenCreateArgs(completion=q.completion(h))).token
              for h in handlers]
    for t in tokens:
        _capi.call("host_token_complete", _capi.HostTokenCompleteArgs(token=t, code=code))


def _until(done, step, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "completions not delivered within 10 s"
        step()


@needs_fast
def test_a_raising_handler_does_not_lose_the_others_of_its_batch():
    q = _queues._Queue()
    try:
        ran, raised = [], []

        def bad(code, cuda_result):
            raise KeyError("handler")

        _complete_all(q, [bad, lambda code, cr: ran.append(code)], errors.CANCELLED)

        def step():
            _queues.wait_fd(q.fd, 0.01)
            try:
                q.drain()
            except KeyError:
                raised.append(1)
        _until(lambda: ran and raised, step)
        assert ran == [errors.CANCELLED] and raised == [1] and not q.pending()
    finally:
        q.destroy()


def test_take_one_takes_one():
    q = _queues._Queue()
    try:
        ran = []
        _complete_all(q, [lambda code, cr, i=i: ran.append(i) for i in range(3)])

        def step():
            _queues.wait_fd(q.fd, 0.01)
            before = len(ran)
            taken = q.take_one()
            assert taken in (0, 1) and len(ran) == before + taken
        _until(lambda: len(ran) == 3, step)
        assert ran == [0, 1, 2] and q.take_one() == 0 and q.drain() == 0
    finally:
        q.destroy()


def test_poll_one_takes_one_after_its_own_look():
    # ABI 1.7's queue_poll (fast path and ctypes alike): the records one at a time, in order, with no fd wait between
    # (this thread's own pass finds the completed host tokens when the poller thread has not yet), then none.
    q = _queues._Queue()
    try:
        assert _capi.has("queue_poll")
        ran = []
        _complete_all(q, [lambda code, cr, i=i: ran.append(i) for i in range(3)])

        def step():
            before = len(ran)
            taken = q.poll_one()
            assert taken in (0, 1) and len(ran) == before + taken
        _until(lambda: len(ran) == 3, step)
        assert ran == [0, 1, 2] and q.poll_one() == 0 and q.drain() == 0
    finally:
        q.destroy()


# ---- the DLPack C exchange API, from a producer written with ctypes -------------------------------------------------

class _Header(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("prev_api", ctypes.c_void_p)]


_FROM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_DESCRIBE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
_TO = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))


class _ExchangeApi(ctypes.Structure):
    _fields_ = [("header", _Header), ("allocator", ctypes.c_void_p), ("from_py", _FROM), ("to_py", _TO),
                ("describe", _DESCRIBE), ("current_work_stream", _STREAM)]


class _Producer:
    """A producer of CUDA tensors through the exchange API alone (no __dlpack__), built with ctypes."""
    from cuasync import _dlpack as dl
    deleted = []
    live = {}
    streams = []

    def __init__(self, ptr, shape, device=2):
        self.ptr, self.shape, self.device = ptr, shape, device


def _tensor_of(obj_address):
    obj = ctypes.cast(obj_address, ctypes.py_object).value
    shape = (ctypes.c_int64 * len(obj.shape))(*obj.shape)
    t = _Producer.dl.Tensor(data=obj.ptr, device=_Producer.dl.Device(obj.device, 0), ndim=len(obj.shape),
                            dtype=_Producer.dl.DataType(2, 32, 1), shape=shape, strides=None, byte_offset=16)
    return t, shape


@_Producer.dl._DELETER
def _delete(p):
    _Producer.deleted.append(p)
    _Producer.live.pop(p, None)


@_FROM
def _from_py(obj_address, out):
    t, shape = _tensor_of(obj_address)
    m = _Producer.dl.ManagedVersioned(version=_Producer.dl.Version(1, 0), manager_ctx=None, deleter=_delete,
                                      flags=1, dl_tensor=t)
    _Producer.live[ctypes.addressof(m)] = (m, shape)
    out[0] = ctypes.addressof(m)
    return 0


@_DESCRIBE
def _describe(obj_address, out):
    t, shape = _tensor_of(obj_address)
    _Producer.live["describe"] = shape  # the shape lives until the producer's next call, as the exchange allows
    ctypes.memmove(out, ctypes.addressof(t), ctypes.sizeof(t))
    return 0


@_STREAM
def _current_work_stream(device_type, device_id, out):
    _Producer.streams.append((device_type, device_id))
    out[0] = 0x5A5A
    return 0


_API = _ExchangeApi(header=_Header(1, 3, None), from_py=_from_py, describe=_describe,
                    current_work_stream=_current_work_stream)
_NAME = ctypes.create_string_buffer(b"dlpack_exchange_api")  # a capsule keeps a pointer to its name
_Producer.__dlpack_c_exchange_api__ = _Producer.dl._api.PyCapsule_New(ctypes.addressof(_API),
                                                                      ctypes.addressof(_NAME), None)


@needs_fast
def test_exchange_api_pointers_and_streams_in_a_launch():
    assert fast.exchange_version(_Producer(0x1000, (4,))) == (1, 3)
    assert fast.exchange_version(object()) is None
    blob, uses = _kernel((8, 8, 8))._fast.pack(_Stub, 1, 1, 0, 0, (_Producer(0x1000, (4,)), _Producer(0x3000, (2,), 3),
                                                               _Producer(0x5000, (2,), 13)))
    assert [v for _, v in _decode(blob)[1]] == [struct.pack("<Q", a) for a in (0x1010, 0x3010, 0x5010)]
    # The current work stream of a CUDA or managed tensor's device; a pinned host one has none to order after.
    assert uses == ((), (0, 1, 2), (0x5A5A, None, 0x5A5A))


@needs_fast
def test_exchange_api_import_owns_the_tensor_and_deletes_it_once():
    _Producer.deleted.clear()
    managed, dev_type, dev_id, stream, dtype, shape, flags = fast.dlpack_import(_Producer(0x1000, (4, 3)))
    assert (dev_type, dev_id, stream, dtype, shape, flags) == (2, 0, 0x5A5A, (2, 32, 1), (4, 3), 1)
    assert managed in _Producer.live and not _Producer.deleted
    fast.delete_managed(managed)
    assert _Producer.deleted == [managed] and managed not in _Producer.live
    owning, borrowed = fast.time_exchange(_Producer(0x1000, (4,)), 100)
    assert owning > 0 and borrowed > 0 and len(_Producer.deleted) == 101
    assert fast.dlpack_import(object()) is None


# ---- awaiting an operation: the bounded inline poll ------------------------------------------------------------------

def _submit_host_work(monkeypatch, budget_s, complete):
    """An operation submitted to a fresh loop's queue whose work is a host token, completed at once or never; returns
    (the loop's queue, a coroutine awaiting it)."""
    import asyncio
    from cuasync import _loop
    monkeypatch.setattr(_loop, "_INLINE_POLL_S", budget_s)
    loop = asyncio.new_event_loop()
    lc = _loop.LoopCompletions(loop)

    def issue(queue, token):
        c = _capi.Completion(queue=queue, token=token)
        h = _capi.call("host_token_create", _capi.HostTokenCreateArgs(completion=c)).token
        if complete:
            _capi.call("host_token_complete", _capi.HostTokenCompleteArgs(token=h, code=0))
        else:
            issue.token = h
        return 0
    fut = lc.submit(loop, _Stub, issue, None, "host work", result="done")

    async def waiter():
        return await fut
    return loop, lc, waiter(), issue


def _close(loop, lc, issue):
    if getattr(issue, "token", None):  # complete it, so the token does not outlive the test
        _capi.call("host_token_complete", _capi.HostTokenCompleteArgs(token=issue.token, code=errors.CANCELLED))
    lc._handlers.clear()
    loop.close()
    lc.destroy()


def test_an_await_of_done_work_completes_without_a_loop_iteration(monkeypatch):
    loop, lc, coro, issue = _submit_host_work(monkeypatch, 10.0, complete=True)
    try:
        with pytest.raises(StopIteration) as e:  # the coroutine never yielded to the loop
            coro.send(None)
        assert e.value.value == "done"
    finally:
        _close(loop, lc, issue)


def test_the_inline_poll_is_bounded(monkeypatch):
    loop, lc, coro, issue = _submit_host_work(monkeypatch, 0.002, complete=False)
    try:
        t0 = time.perf_counter()
        yielded = coro.send(None)  # not complete within the budget: the task yields its future to the loop
        assert time.perf_counter() - t0 < 5.0 and not yielded.done()
        coro.close()
    finally:
        _close(loop, lc, issue)


class _HostTensor:
    """What a PyTorch CPU tensor shows a launch: data_ptr(), is_cuda False, is_pinned()."""

    def __init__(self, pinned):
        self.pinned, self.device = pinned, "cpu"
        self.is_cuda = False

    def data_ptr(self):
        return 0x7000

    def is_pinned(self):
        return self.pinned


def test_a_pageable_host_tensor_is_refused_naming_the_parameter():
    k = _kernel((8, 8))
    with pytest.raises(errors.InvalidArgumentError, match=r"parameter 1 .*host tensor \(device cpu, not pinned\)"):
        k.launch_untracked(_stream(), 1, 1, 0x1000, _HostTensor(False))
    if fast is not None:
        assert k._fast.pack(_Stub, 1, 1, 0, 0, (1, _HostTensor(True))) is NotImplemented  # the package decides
        cpu = _Producer(0x1000, (4,), device=1)  # kDLCPU through the exchange API
        assert k._fast.pack(_Stub, 1, 1, 0, 0, (1, cpu)) is NotImplemented
    # Pinned host memory is device-accessible: packed (the launch then fails here only for the fake kernel).
    ref, _, foreign = k._blob(_stream(), 1, 1, (1, _HostTensor(True)), 0, 0)
    assert foreign == (1,)


def test_no_inline_poll_with_other_operations_in_flight(monkeypatch):
    loop, lc, coro, issue = _submit_host_work(monkeypatch, 10.0, complete=True)
    lc._handlers[-1] = lambda code, cr: None  # another operation in flight: the loop's spin and fd serve both
    try:
        t0 = time.perf_counter()
        yielded = coro.send(None)  # yields at once, without polling for 10 s
        assert time.perf_counter() - t0 < 5.0 and yielded is not None
        coro.close()
    finally:
        _close(loop, lc, issue)


from test_typed_args import _SIMULATED, run_simulated  # noqa: E402  (the simulated driver's process)

_UNTRACKED = r"""
import sys, cuasync
src = 'extern "C" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned v) {}'  # run by name (sim_kernels.cpp)
k = cuasync.compile(src).sim_fill_u32
s, other = cuasync.Stream(), cuasync.Stream()
out = cuasync.zeros(4, "uint32", stream=s)
class CAI:  # a framework's array: the CUDA array interface only
    def __init__(self, p):
        self.__cuda_array_interface__ = {"data": (p, False), "shape": (4,), "typestr": "<u4", "version": 3}
calls = []  # Python frames of launch_untracked: none where the kernel's own is the C one
sys.setprofile(lambda frame, event, arg: event == "call" and frame.f_code.co_name == "launch_untracked" and
               calls.append(1))
k.launch_untracked(s, 1, 1, out, 4, 2**32 - 1)
s.synchronize()
print("BUFFER", list(memoryview(out.tobytes()).cast("I")))
k.launch_untracked(s, 1, 1, CAI(out.ptr), 3, 7)
s.synchronize()
print("CAI", list(memoryview(out.tobytes()).cast("I")))
k.launch_untracked(other, 1, 1, out, 1, 9)  # last used on `s`: noted on `other`, after the launch
other.synchronize()
print("NOTED", out._streams[-1] is other, list(memoryview(out.tobytes()).cast("I")))
sys.setprofile(None)
print("PYTHON FRAMES", len(calls), type(k.__dict__.get("launch_untracked")).__name__)
third = cuasync.Stream()
k.launch_untracked(third, (1, 1), 1, out, 4, 0, shared_memory=0)  # still one C call
third.synchronize()
k.launch_untracked(s, 1, 1, out, 4, 1.5)  # a float for an unsigned: the general path's packing, then launched
s.synchronize()
print("GENERAL", list(memoryview(out.tobytes()).cast("I")))
try:
    k.launch_untracked(s, 1, 1, out, 4)
except cuasync.errors.InvalidArgumentError as e:
    print("REFUSED", e)
home = cuasync.zeros(4, "uint32", stream=s)
c_calls, py_calls = [], []
sys.setprofile(lambda frame, event, arg: c_calls.append(getattr(arg, "__name__", "?")) if event == "c_call" else
               py_calls.append(getattr(frame.f_code, "co_qualname", frame.f_code.co_name)) if event == "call" else None)
pending = k.launch(s, 1, 1, home, 4, 11)  # tracked, outside a loop, used on its stream: call_tracked launches it
again = k.launch(s, 1, 1, home, 2, 13)  # the same stream: a Pending of its own
sys.setprofile(None)
pending.wait()
import time
until = time.monotonic() + 10  # no completion of its own: done once its stream's work so far is (an event asked)
while not pending.done() and time.monotonic() < until:
    time.sleep(0.001)
print("DONE", pending.done())
print("PENDING", type(pending).__name__, pending._description().startswith("kernel 'sim_fill_u32' on <cuasync.Stream"),
      [f for f in py_calls if f in ("Pending.__init__", "Kernel._launched_outside_loop.<locals>.launched",
                                    "Kernel._launch_packed", "Kernel.launch")])
print("TRACKED", list(memoryview(home.tobytes()).cast("I")),
      [c for c in c_calls if c in ("call_tracked", "launch_now", "pack", "fire")], again is not pending)
fourth = cuasync.Stream()
k.launch(fourth, 1, 1, home, 2, 12).wait()  # last used on another stream: ordered first, then the copied blob fired
print("ORDERED", list(memoryview(home.tobytes()).cast("I")), home._streams[-1] is fourth)
"""


@pytest.mark.skipif(not os.path.exists(_SIMULATED), reason="no simulated driver next to this build's library")
def test_untracked_launch_in_one_call_on_the_simulated_driver():
    # The fast path's launch_untracked (packed on the C stack, launched, one call; its packing is pack()'s, whose layout
    # for every type the tests above compare with ctypes'), or ctypes: the simulated kernel fills what it was given
    # through a Buffer and an array-interface pointer; a buffer last used on another stream is noted after the launch.
    r = run_simulated(_UNTRACKED)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"BUFFER {[2**32 - 1] * 4}" in r.stdout, r.stdout
    assert f"CAI {[7, 7, 7, 2**32 - 1]}" in r.stdout, r.stdout
    assert "NOTED True [9, 7, 7, 4294967295]" in r.stdout, r.stdout
    # The fast path: no Python frame per launch (the kernel's launch_untracked is the C one); ctypes: 3 launches.
    frames = "PYTHON FRAMES 0 builtin_function_or_method" if fast is not None else "PYTHON FRAMES 3 NoneType"
    assert frames in r.stdout, r.stdout
    assert f"GENERAL {[0x3FC00000] * 4}" in r.stdout, r.stdout  # extern "C": sizes only, 1.5 packed as a float
    assert "REFUSED kernel 'sim_fill_u32' takes 3 parameter(s), 2 given" in r.stdout, r.stdout
    # The fast path: Kernel.launch outside a loop is the Launcher's call_tracked, one C call (then the Pending).
    calls = "['call_tracked', 'call_tracked'] True" if fast is not None else "[] True"
    assert f"TRACKED {[13, 13, 11, 11]} {calls}" in r.stdout, r.stdout
    assert "DONE True" in r.stdout, r.stdout
    # The fast path's Pending is made in C (no Python frame); its description names the kernel and the stream.
    assert f"PENDING Pending True {[] if fast is not None else ['Kernel.launch', 'Pending.__init__'] * 2}" in \
        r.stdout, r.stdout
    assert f"ORDERED {[12, 12, 11, 11]} True" in r.stdout, r.stdout


_IN_LOOP = r"""
import asyncio, sys, cuasync
src = 'extern "C" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned v) {}'  # run by name (sim_kernels.cpp)
k = cuasync.compile(src).sim_fill_u32
async def values(b):  # tobytes() blocks: from a thread of the loop's pool
    return list(memoryview(await asyncio.to_thread(b.tobytes)).cast("I"))
async def main():
    s = cuasync.Stream()
    out = cuasync.zeros(4, "uint32", stream=s)
    frames = []
    sys.setprofile(lambda frame, event, arg: event == "call" and frames.append(frame.f_code.co_name))
    fut = k.launch(s, 1, 1, out, 4, 5)
    sys.setprofile(None)
    await fut
    print("AWAITED", await values(out), [f for f in frames if f in ("fired", "_launch_packed", "submit_fired", "launch")])
    futs = [k.launch(s, 1, 1, out, 4 - i, 20 + i) for i in range(4)]  # in flight together: each its own future
    await asyncio.gather(*futs)
    print("GATHERED", await values(out), len({id(f) for f in futs}))
    # One place per stream: the launches after the first wait in the loop's backlog (BUSY) and run in call order.
    s.runtime.set_admission_limits(1, 0)
    futs = [k.launch(s, 1, 1, out, 4 - i, 30 + i) for i in range(4)]
    await asyncio.gather(*futs)
    s.runtime.set_admission_limits(0, 0)
    print("BACKLOG", await values(out))
    other = cuasync.Stream()  # last used on `s`: noted and ordered first, through the packed path
    await k.launch(other, 1, 1, out, 2, 40)
    print("ORDERED", await values(out), out._streams[-1] is other)
    try:
        await k.launch(s, 1, 1, out, 4)
    except cuasync.errors.InvalidArgumentError as e:
        print("REFUSED", e)
    print("NOT HANDED OUT", s._native is None, other._native is None, s != other, s == s)
    print("HANDED OUT", s.native != 0, s._native is not None)
    await k.launch(s, 1, 1, out, 1, 50)  # a handed-out stream: the same path, asking the driver about capture
    print("AFTER", await values(out))
asyncio.run(main())
"""


@pytest.mark.skipif(not os.path.exists(_SIMULATED), reason="no simulated driver next to this build's library")
def test_awaited_launch_reaches_the_driver_before_its_future_on_the_simulated_driver():
    # In a running loop the compiled call_tracked launches with its completion into the loop's queue first and the
    # queue's fired() makes the future after; a backlog (a full stream), uses to note and errors take the package's
    # path. A stream never handed out stays so.
    r = run_simulated(_IN_LOOP)
    assert r.returncode == 0, r.stdout + r.stderr
    path = "['fired']" if fast is not None else "['launch']"
    assert f"AWAITED {[5] * 4} {path}" in r.stdout, r.stdout
    assert f"GATHERED {[23, 22, 21, 20]} 4" in r.stdout, r.stdout
    assert f"BACKLOG {[33, 32, 31, 30]}" in r.stdout, r.stdout
    assert f"ORDERED {[40, 40, 31, 30]} True" in r.stdout, r.stdout
    assert "REFUSED kernel 'sim_fill_u32' takes 3 parameter(s), 2 given" in r.stdout, r.stdout
    assert "NOT HANDED OUT True True True True" in r.stdout, r.stdout
    assert "HANDED OUT True True" in r.stdout, r.stdout
    assert f"AFTER {[50, 40, 31, 30]}" in r.stdout, r.stdout


_LOOPS_ON_THREADS = r"""
import asyncio, sys, threading, cuasync
src = 'extern "C" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned v) {}'  # run by name (sim_kernels.cpp)
k = cuasync.compile(src).sim_fill_u32
results = {}
def worker(i):
    async def main():
        s = cuasync.Stream()
        out = cuasync.zeros(4, "uint32", stream=s)
        for j in range(400):  # one kernel, launched from two loops at once: its cached queue is each loop's in turn
            await asyncio.wait_for(k.launch(s, 1, 1, out, 4, 1000 * i + j), 30)
        data = await asyncio.to_thread(out.tobytes)
        results[i] = list(memoryview(data).cast("I"))
    asyncio.run(main())
threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join(120)
print("THREADS", [results.get(i) for i in range(2)])
"""


@pytest.mark.skipif(not os.path.exists(_SIMULATED), reason="no simulated driver next to this build's library")
def test_one_kernel_awaited_from_loops_on_two_threads_on_the_simulated_driver():
    # The compiled launch caches the running loop's queue per kernel and lets the GIL go around the launch: another
    # thread's loop replacing the cache meanwhile must not send this launch's future to that loop.
    r = run_simulated(_LOOPS_ON_THREADS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"THREADS {[[399] * 4, [1399] * 4]}" in r.stdout, r.stdout + r.stderr


@needs_fast
def test_a_kernel_with_its_c_launch_untracked_is_collected():
    # kernel -> its launch_untracked (the Launcher's C method) -> the Launcher -> kernel: a cycle the collector frees.
    import gc
    import weakref
    k = _kernel((8,))
    assert type(k.__dict__["launch_untracked"]).__name__ == "builtin_function_or_method"
    gone = weakref.ref(k)
    del k
    gc.collect()
    assert gone() is None
