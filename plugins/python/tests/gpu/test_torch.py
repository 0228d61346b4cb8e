# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch: DLPack both ways on PyTorch's streams, the custom op under opcheck, torch.compile and CUDA graphs, and
one shared context whichever initializes first."""
import os
import subprocess
import sys
import threading
import time

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

import cuasync  # noqa: E402
import cuasync.torch as ct  # noqa: E402

pytestmark = pytest.mark.timeout(300)
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cuasync.__file__)))  # the package under test


def storage_uses(t):
    """The storage's C++ use count, where this PyTorch exposes it (None elsewhere)."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count(t.untyped_storage()._cdata) if count else None


def test_round_trip_on_current_stream_equals_pytorch(module):
    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    ct.launch(module.scale_add, cuasync.grid_for(x.numel()), 256, x, y, out, 3.0, x.numel())
    torch.testing.assert_close(out, 3.0 * x + y, rtol=0, atol=0)


def test_consumer_never_sees_data_early_and_the_host_never_waits(module):
    # The producer stream spins 300 ms on the GPU, then writes the tensor. cuasync imports it on its own stream
    # (the DLPack handshake makes that stream wait on the device) and reads it. The host must get through all of it
    # while the producer still spins (no host synchronisation), and the result must be the written data.
    producer = torch.cuda.Stream()
    x = torch.zeros(1 << 16, device="cuda")
    torch.cuda.synchronize()
    s = cuasync.Stream()
    with torch.cuda.stream(producer):
        t0 = time.perf_counter()
        ct.launch(module.spin, 1, 1, 300_000_000)  # 300 ms of GPU time on the producer stream
        x.fill_(7.0)
        imported = cuasync.from_dlpack(x, stream=s)
    out = cuasync.empty(x.numel(), "float32", stream=s)
    module.scale_add.launch(s, cuasync.grid_for(x.numel()), 256, imported, imported, out, 1.0, x.numel())
    host_time = time.perf_counter() - t0
    assert not producer.query(), "the producer finished before the host was done: the test proves nothing"
    assert host_time < 0.1, f"the host waited {host_time * 1e3:.1f} ms: something synchronized"
    got = torch.from_dlpack(out)  # ordered after cuasync's stream by the handshake
    torch.testing.assert_close(got, torch.full_like(x, 14.0), rtol=0, atol=0)


def test_deleter_runs_exactly_once():
    # 64 MiB that only the DLPack capsule keeps once `x` is gone: held while cuasync uses it, given back after the
    # free (the deleter ran), and given back once (a second deleter call would free PyTorch's memory twice).
    import gc
    gc.collect()
    gc.disable()  # nothing else is given back meanwhile: the counts below are this test's alone
    try:
        x = torch.ones(16 << 20, device="cuda")
        s = cuasync.Stream()
        b = cuasync.from_dlpack(x, stream=s)
        held = torch.cuda.memory_allocated()
        del x
        assert torch.cuda.memory_allocated() == held, "the tensor went while cuasync holds it"
        b.free()
        s.synchronize()
        cuasync.collect()
        assert torch.cuda.memory_allocated() == held - (64 << 20), "the deleter did not run"
        del b
        cuasync.collect()
        y = torch.zeros(16 << 20, device="cuda")  # reuses the block: a late second delete would corrupt it
        torch.cuda.synchronize()
        assert torch.cuda.memory_allocated() == held and float(y.sum()) == 0.0
    finally:
        gc.enable()


def test_failed_import_leaves_the_tensor_to_its_owner():
    x = torch.ones((4, 4), device="cuda").t()  # not contiguous: refused by cuasync
    before = storage_uses(x)
    with pytest.raises(cuasync.InvalidArgumentError, match="contiguous"):
        cuasync.from_dlpack(x)
    import gc
    gc.collect()
    assert storage_uses(x) == before


def test_export_to_pytorch_orders_its_stream():
    s = cuasync.Stream()
    b = cuasync.zeros(256, "float32", stream=s)
    t = torch.from_dlpack(b)  # PyTorch's current stream waits for s on the device
    torch.testing.assert_close(t, torch.zeros(256, device="cuda"))
    assert t.data_ptr() == b.ptr
    del b  # the exported view keeps the memory
    torch.testing.assert_close(t + 1, torch.ones(256, device="cuda"))


def _exchange_fast_path():
    from cuasync import _fastpath
    fast = _fastpath.get()
    if fast is None:
        pytest.skip("the compiled fast path is not in use")
    if fast.exchange_version(torch.empty(1, device="cuda")) is None:
        pytest.skip("this PyTorch has no __dlpack_c_exchange_api__")
    return fast


def test_tracked_launch_of_torch_tensors_orders_after_torchs_stream_through_the_exchange_api(module):
    fast = _exchange_fast_path()
    # The borrowed describe is optional in the exchange API: without it the address comes from data_ptr() and the
    # package finds the producer stream itself (False in `uses`).
    described = fast.time_exchange(torch.empty(1, device="cuda"), 1)[1] is not None
    producer = torch.cuda.Stream()
    x = torch.zeros(1 << 16, device="cuda")
    out = torch.empty_like(x)
    torch.cuda.synchronize()
    s = cuasync.Stream()
    n, k = x.numel(), module.scale_add
    with torch.cuda.stream(producer):
        ct.launch(module.spin, 1, 1, 200_000_000)  # 200 ms on the producer, then the write
        x.fill_(5.0)
        t0 = time.perf_counter()
        _, uses = k._fast.pack(s, cuasync.grid_for(n), 256, 0, 0, (x, x, out, 1.0, n))
        op = k.launch(s, cuasync.grid_for(n), 256, x, x, out, 1.0, n)
        host_time = time.perf_counter() - t0
    # The exchange API named PyTorch's current stream as every tensor's producer.
    assert uses == ((), (0, 1, 2), (producer.cuda_stream if described else False,) * 3)
    assert not producer.query() and host_time < 0.1, "something synchronized on the host"
    op.wait()
    torch.testing.assert_close(out, torch.full_like(x, 10.0), rtol=0, atol=0)


def test_from_dlpack_goes_through_the_exchange_api(monkeypatch):
    fast = _exchange_fast_path()
    calls = []
    real = fast.dlpack_import
    monkeypatch.setattr(fast, "dlpack_import", lambda obj: calls.append(obj) or real(obj))
    x = torch.arange(1024, dtype=torch.float32, device="cuda")
    s = cuasync.Stream()
    b = cuasync.from_dlpack(x, stream=s)
    assert len(calls) == 1 and b.ptr == x.data_ptr() and b.shape == (1024,) and b.dtype == "float32"
    assert b.tobytes() == x.cpu().numpy().tobytes()
    b.free()


def test_a_cpu_tensor_is_refused_for_a_device_pointer(module):
    x = torch.ones(16)
    with pytest.raises(cuasync.InvalidArgumentError, match="parameter 0 .*host tensor"):
        ct.launch(module.scale_add, 1, 16, x, x, x, 1.0, 16)


def test_custom_op_opcheck():
    x = torch.randn(1000, device="cuda")
    y = torch.randn(1000, device="cuda")
    torch.library.opcheck(torch.ops.cuasync.scale_add.default, (x, y, 2.5))
    xg = torch.randn(64, device="cuda", requires_grad=True)
    yg = torch.randn(64, device="cuda", requires_grad=True)
    torch.library.opcheck(torch.ops.cuasync.scale_add.default, (xg, yg, -1.0))
    torch.testing.assert_close(torch.ops.cuasync.scale_add(x, y, 2.5), 2.5 * x + y, rtol=0, atol=0)


def test_custom_op_under_torch_compile_fullgraph():
    @torch.compile(fullgraph=True)
    def f(x, y):
        return torch.ops.cuasync.scale_add(x * 2, y, 0.5).sin()
    x = torch.randn(4096, device="cuda")
    y = torch.randn(4096, device="cuda")
    torch.testing.assert_close(f(x, y), (0.5 * (x * 2) + y).sin())


def test_custom_op_in_cuda_graph_capture_and_replay():
    ct.scale_add.warm_up()
    x = torch.randn(1 << 16, device="cuda")
    y = torch.randn(1 << 16, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as PyTorch asks
        torch.ops.cuasync.scale_add(x, y, 2.0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # global capture mode: any synchronizing call would invalidate it
        out = torch.ops.cuasync.scale_add(x, y, 2.0)
    for v in (1.0, -3.0, 5.0):
        x.fill_(v)
        g.replay()
        torch.testing.assert_close(out, 2.0 * x + y, rtol=0, atol=0)


def test_tracked_cuasync_work_inside_torch_cuda_graph_replays(module):
    # Issue 30: inside torch.cuda.graph (global capture mode) a memset, tracked launches of a JIT kernel on two adopted
    # streams handed the buffer between them (wait_stream: a fork and a join of the capture) and a pinned copy become
    # graph nodes; the capture is never invalidated, and every replay gives the right data.
    import ctypes

    import numpy as np
    n = 4096
    cap_t, other_t = torch.cuda.Stream(), torch.cuda.Stream()
    cap, other = cuasync.Stream.adopt(cap_t), cuasync.Stream.adopt(other_t)
    x = cuasync.zeros(n, "float32", stream=cap)
    host = cuasync.empty(n, "float32", pinned=True)
    grid = cuasync.grid_for(n)
    module.add_one.launch(cap, grid, 256, x, n)  # warm-up, outside the capture: both streams have used x once
    other.wait_stream(cap)
    module.add_one.launch(other, grid, 256, x, n)
    cap.wait_stream(other)
    cuasync.copy(host, x, stream=cap).wait()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=cap_t):
        steps = [lambda: cuasync.memset(x, 0, stream=cap),
                 lambda: module.add_one.launch(cap, grid, 256, x, n),
                 lambda: other.wait_stream(cap),
                 lambda: module.add_one.launch(other, grid, 256, x, n),
                 lambda: cap.wait_stream(other),
                 lambda: module.add_one.launch(cap, grid, 256, x, n),
                 lambda: cuasync.copy(host, x, stream=cap)]
        for step in steps:
            step()
            assert torch.cuda.is_current_stream_capturing()
    replays = int(os.environ.get("CUASYNC_CAPTURE_REPLAYS", "10000"))
    wrong = 0
    for _ in range(replays):
        ctypes.memset(host.ptr, 0xff, n * 4)  # NaNs: a replay that copies nothing is seen
        g.replay()
        torch.cuda.synchronize()
        wrong += int(np.count_nonzero(np.frombuffer(host.tobytes(), dtype=np.float32) != 3.0))
        if wrong:
            break
    assert wrong == 0


def test_completions_stream_in_while_a_thread_synchronizes(module):
    # cuasync's completions (poller thread, eventfd) while another thread calls torch.cuda.synchronize() in a loop:
    # no deadlock on the GIL or the driver's locks.
    import asyncio
    stop = threading.Event()
    syncs = []

    def syncer():
        while not stop.is_set():
            torch.cuda.synchronize()
            syncs.append(1)
    th = threading.Thread(target=syncer)
    th.start()
    try:
        async def main():
            s = cuasync.Stream()
            out = cuasync.zeros(2000, stream=s)
            for i in range(2000):
                await module.fill_index.launch(s, 1, 1, out, i)
            return out
        out = asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        stop.set()
        th.join(60)
    assert not th.is_alive() and len(syncs) > 0
    t = torch.from_dlpack(out)
    torch.testing.assert_close(t, torch.arange(2000, dtype=torch.float32, device="cuda"))


@pytest.mark.parametrize("order", ["torch_first", "cuasync_first"])
def test_both_initialization_orders_share_one_context(order):
    code = f"""
import ctypes, sys
order = {order!r}
cuda = ctypes.CDLL("libcuda.so.1")
def current():
    c = ctypes.c_void_p()
    assert cuda.cuCtxGetCurrent(ctypes.byref(c)) == 0
    return c.value
if order == "torch_first":
    import torch
    a = torch.arange(10, device="cuda", dtype=torch.float32)
    torch_ctx = current()
    import cuasync, cuasync.torch as ct
    s = cuasync.Stream()
else:
    import cuasync
    s = cuasync.Stream()
    m = cuasync.compile('extern "C" __global__ void k(float* x) {{ x[threadIdx.x] += 1; }}')
    b = cuasync.zeros(10, stream=s)
    m.k.launch(s, 1, 10, b)
    s.synchronize()
    import torch, cuasync.torch as ct
    a = torch.arange(10, device="cuda", dtype=torch.float32)
    torch_ctx = current()
assert s.context == torch_ctx, (hex(s.context), hex(torch_ctx))
out = torch.ops.cuasync.scale_add(a, a, 2.0)  # a cuasync kernel on a tensor: no invalid resource handle
assert out.tolist() == [3.0 * i for i in range(10)], out
print("SHARED", hex(s.context))
"""
    env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=240)
    assert "SHARED" in r.stdout, r.stdout + r.stderr


def test_typed_launch_checks_tensor_dtypes_on_the_gpu():
    # A C++ kernel: a float32 tensor runs (an int for its float converted), a float64 one is refused naming the
    # parameter, on whichever path (fast or ctypes) this run uses; the second launch of each reuses the plan.
    mod = cuasync.compile(r'''template <class T> __global__ void scale(T* x, T a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }''', name_expressions=["scale<float>"])
    k = mod.kernel("scale<float>")
    assert k.param_type_names == ("float*", "float", "int")
    x = torch.ones(1024, device="cuda")
    s = ct.current_stream()
    for _ in range(2):
        k.launch_untracked(s, cuasync.grid_for(1024), 256, x, 2, 1024)
    torch.cuda.synchronize()
    torch.testing.assert_close(x, torch.full_like(x, 4.0), rtol=0, atol=0)
    for _ in range(2):
        with pytest.raises(cuasync.InvalidArgumentError, match=r"parameter 0 is float\* but the argument given is "
                                                                r"double\*"):
            k.launch_untracked(s, 1, 256, x.double(), 2.0, 1024)
