# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Awaitable replays (cuasync.ReplayAnchor, C ABI 1.6) of a graph this test captures and launches with the driver's
own calls, as a framework does: each replay awaited once, with its work done (never early); a blocking wait outside a
loop; a mark outside a capture refused. On a GPU, and on the simulated driver (CUASYNC_LIBCUDA, with
FAKE_CUDA_COMPUTE_CAPABILITY=95: it runs sim_add_u32 by name)."""
import asyncio
import ctypes
import os

import pytest

import cuasync

SOURCE = r'''extern "C" __global__ void sim_add_u32(unsigned* p, unsigned n, unsigned v) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += v; }'''
VP = ctypes.c_void_p


class Driver:
    """The capture and graph entry points of the libcuda cuasync loaded."""

    def __init__(self):
        lib = ctypes.CDLL(os.environ.get("CUASYNC_LIBCUDA") or "libcuda.so.1", mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        get = lib.cuGetProcAddress_v2
        get.argtypes = [ctypes.c_char_p, ctypes.POINTER(VP), ctypes.c_int, ctypes.c_uint64, ctypes.POINTER(ctypes.c_int)]

        def fn(name, version, *argtypes):
            p, q = VP(), ctypes.c_int()
            assert get(name.encode(), ctypes.byref(p), version, 0, ctypes.byref(q)) == 0 and p.value, name
            return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(p.value)
        self.begin = fn("cuStreamBeginCapture", 10010, VP, ctypes.c_int)
        self.end = fn("cuStreamEndCapture", 10000, VP, ctypes.POINTER(VP))
        self.instantiate = fn("cuGraphInstantiateWithFlags", 11040, ctypes.POINTER(VP), VP, ctypes.c_ulonglong)
        self.launch = fn("cuGraphLaunch", 10000, VP, VP)
        self.exec_destroy = fn("cuGraphExecDestroy", 10000, VP)
        self.destroy = fn("cuGraphDestroy", 10000, VP)


@pytest.fixture
def captured():
    """A graph [+1 to four pinned words, the anchor's mark] captured in global mode on a cuasync stream."""
    cuasync.device_count()  # loads the driver
    d = Driver()
    mod = cuasync.compile(SOURCE)
    s = cuasync.Stream()
    words = cuasync.empty(4, "uint32", pinned=True)
    ctypes.memset(words.ptr, 0, 16)
    assert d.begin(s.native, 0) == 0  # CU_STREAM_CAPTURE_MODE_GLOBAL
    mod.sim_add_u32.launch_untracked(s, 1, 4, words, 4, 1)
    anchor = cuasync.ReplayAnchor(s)
    graph, exe = VP(), VP()
    assert d.end(s.native, ctypes.byref(graph)) == 0  # not invalidated by the mark
    assert d.instantiate(ctypes.byref(exe), graph, 0) == 0
    yield d, s, anchor, exe, (ctypes.c_uint32 * 4).from_address(words.ptr)
    d.exec_destroy(exe)
    d.destroy(graph)
    anchor.close()


def test_each_replay_is_awaited_once_with_its_work_done(captured):
    d, s, anchor, exe, words = captured
    replays = int(os.environ.get("CUASYNC_CAPTURE_REPLAYS", "1000"))

    async def main():
        wrong = 0
        for i in range(1, replays + 1):
            assert d.launch(exe, s.native) == 0
            assert await anchor.wait(i) == i
            wrong += sum(w != i for w in words)
        return wrong
    assert asyncio.run(main()) == 0
    assert anchor.generation == replays


def test_a_blocking_wait_for_the_next_replay(captured):
    d, s, anchor, exe, words = captured
    w = anchor.wait()  # generation 0: the next
    assert w.generation == anchor.generation + 1 == 1
    assert d.launch(exe, s.native) == 0
    assert w.wait(timeout=30) == 1
    assert list(words) == [1, 1, 1, 1]
    assert anchor.wait(1).wait(timeout=30) == 1  # reached already: at once


def test_a_mark_outside_a_capture_is_refused():
    with pytest.raises(cuasync.CudaError, match="not being captured"):
        cuasync.ReplayAnchor(cuasync.Stream())
