# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""cuasync from Python beside PyTorch and CuPy, in one process, variants alternated (the machine is noisy).

1. Launch overhead (host time per call, small tensors so the GPU keeps up): the cuasync custom op vs the equivalent
   PyTorch op, a CuPy RawKernel launch, and cuasync's own launches (untracked on PyTorch's stream; tracked).
2. asyncio round trip of a 20 us kernel (launch, then learn it finished, from a coroutine): `await kernel.launch()`
   vs `torch.cuda.Stream.synchronize()` (blocks the loop), a busy query with `asyncio.sleep(0)` and
   `run_in_executor(synchronize)`; p50 and p99.

Usage: python3 bench/python/bench_frameworks.py [--json OUT.json] [--markdown OUT.md] [--quick]
"""
import argparse
import asyncio
import copy
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "plugins", "python"))

import cuasync  # noqa: E402

SPIN = r"""
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}
extern "C" __global__ void scale_add(const float* x, const float* y, float* out, float a, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}
extern "C" __global__ void two(unsigned long long* out, unsigned long long v) {
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = v;
}
extern "C" __global__ void add3(const float* a, const float* b, const float* c, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = a[i] + b[i] + c[i];
}
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def native_ops():
    """Builds PyTorch's C++-dispatch op into the cache before cuasync.torch is imported, so this process takes it: a
    fresh machine's cache is empty, where `auto` (a first import never compiles) takes the Python custom op. Returns
    what happened, which the report prints; a failed build is said on stderr too, with the compiler's words."""
    import torch
    from cuasync import _torch_ops
    if _torch_ops.mode() == "python":
        return "not built (CUASYNC_TORCH_OPS=python)"
    t0 = time.perf_counter()
    try:
        path = _torch_ops.cached(torch) or _torch_ops.build(torch)
    except _torch_ops.BuildError as e:
        print(f"\n!!! the C++ op did not build: the custom op row is the Python op !!!\n{e}\n", file=sys.stderr)
        return f"BUILD FAILED (the Python custom op is measured): {str(e).splitlines()[0][:300]}"
    return f"{path} (ready in {time.perf_counter() - t0:.1f} s)"


def launch_overhead(rounds, calls):
    import torch
    import cuasync.torch as ct
    if ct.implementation() != "native" and _torch_ops_note[0].startswith("/"):
        print("!!! the C++ op was built but cuasync.torch did not load it (its log says why)", file=sys.stderr)
    n = 1024
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    mod = cuasync.compile(SPIN, "bench.cu")
    k = mod.scale_add
    grid = cuasync.grid_for(n)
    ct.scale_add.warm_up()
    variants = {
        "torch.add (PyTorch op)": lambda: torch.add(y, x, alpha=2.0),
        # The C++ ops (CUASYNC_TORCH_OPS=native, or built earlier) or the Python custom op: one per process.
        f"cuasync::scale_add ({'C++ dispatch' if ct.implementation() == 'native' else 'custom op'})":
            lambda: torch.ops.cuasync.scale_add(x, y, 2.0),
        "cuasync launch on torch's stream (untracked)": lambda: ct.launch(k, grid, 256, x, y, out, 2.0, n),
        # The like-for-like reference of a custom op: PyTorch's own add through the same route (torch.ops, its
        # OpOverload resolved per call in Python, then the dispatcher), and the custom op through its overload.
        "torch.ops.aten.add.Tensor (PyTorch's op through torch.ops)":
            lambda: torch.ops.aten.add.Tensor(y, x, alpha=2.0),
        "torch.ops.cuasync.scale_add.default (the op's overload)":
            lambda: torch.ops.cuasync.scale_add.default(x, y, 2.0),
    }
    s = cuasync.Stream()
    bx, by, bo = (cuasync.empty(n, "float32", stream=s) for _ in range(3))
    variants["cuasync launch, tracked (own stream)"] = lambda: k.launch(s, grid, 256, bx, by, bo, 2.0, n)
    try:
        import cupy as cp
        import numpy as np
        raw = cp.RawModule(code=SPIN).get_function("scale_add")
        cx, cy, co = cp.asarray(x), cp.asarray(y), cp.asarray(out)
        a32, n64 = np.float32(2.0), np.int64(n)
        variants["CuPy RawKernel"] = lambda: raw((grid,), (256,), (cx, cy, co, a32, n64))
    except ImportError:
        pass
    variants.update(_fast_path_variants(mod, s, x, y, out, n))
    per_call = {name: [] for name in variants}
    for r in range(rounds + 1):
        for name, f in variants.items():
            torch.cuda.synchronize()
            s.synchronize()
            t0 = time.perf_counter()
            for _ in range(calls):
                f()
            dt = (time.perf_counter() - t0) / calls * 1e6
            if r:  # the first round warms up
                per_call[name].append(dt)
    torch.cuda.synchronize()
    s.synchronize()
    base = statistics.median(per_call["torch.add (PyTorch op)"])
    rows = []
    for name, xs in sorted(per_call.items(), key=lambda kv: _ORDER.get(kv[0], 0)):
        med = statistics.median(xs)
        rows.append({"variant": name, "us_per_call_p50": round(med, 2), "us_per_call_p99": round(pct(xs, 99), 2),
                     "vs_torch_op": round(med / base, 3)})
    return rows


_ORDER = {}  # rows of one comparison next to each other in the table
_torch_ops_note = ["not asked"]  # what native_ops() did, for the report


def _ctypes_twin(kernel):
    """The same kernel with the compiled fast path switched off (its ctypes path), for an A/B in one process."""
    twin = copy.copy(kernel)
    twin._fast = None
    twin.__dict__.pop("launch_untracked", None)  # the fast path's C launch_untracked, set on the kernel itself
    return twin


def _fast_path_variants(mod, s, x, y, out, n):
    """The issue-28 comparisons: a 2-argument launch (cuasync tracked and untracked, their ctypes path, cuda.core),
    a 4-tensor launch on PyTorch's stream beside CuPy with the same tensors."""
    import torch
    import cuasync.torch as ct
    v = {}
    two, add3 = mod.two, mod.add3
    cell = cuasync.empty(1, "uint64", stream=s)
    v["2 args: cuasync launch, tracked"] = lambda: two.launch(s, 1, 32, cell, 7)
    v["2 args: cuasync launch_untracked"] = lambda: two.launch_untracked(s, 1, 32, cell, 7)
    slow = _ctypes_twin(two)
    v["2 args: cuasync launch, tracked (ctypes path)"] = lambda: slow.launch(s, 1, 32, cell, 7)
    v["2 args: cuasync launch_untracked (ctypes path)"] = lambda: slow.launch_untracked(s, 1, 32, cell, 7)
    try:
        try:
            from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
        except ImportError:
            from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
        import numpy as np
        dev = Device(0)
        dev.set_current()
        arch = "".join(str(d) for d in dev.compute_capability)
        kernel = Program(SPIN, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}")).compile("cubin") \
            .get_kernel("two")
        cstream = dev.create_stream()
        config = LaunchConfig(grid=1, block=32)
        cargs = (np.uint64(cell.ptr), np.uint64(7))
        launch(cstream, config, kernel, *cargs)
        cstream.sync()
        v["2 args: cuda.core launch"] = lambda: launch(cstream, config, kernel, *cargs)
    except Exception as e:  # noqa: BLE001 - a peer missing or changed: reported, the rest still runs
        print(f"bench: cuda.core skipped: {type(e).__name__}: {e}", file=sys.stderr)
    z = torch.randn(n, device="cuda")
    grid = n // 256
    v["4 tensors: cuasync launch on torch's stream (untracked)"] = lambda: ct.launch(add3, grid, 256, x, y, z, out)
    slow3 = _ctypes_twin(add3)
    v["4 tensors: cuasync launch on torch's stream (untracked, ctypes path)"] = \
        lambda: ct.launch(slow3, grid, 256, x, y, z, out)
    v["4 tensors: cuasync launch, tracked (own stream, ordered after torch's)"] = \
        lambda: add3.launch(s, grid, 256, x, y, z, out)
    try:
        import cupy as cp
        raw = cp.RawModule(code=SPIN).get_function("add3")
        cx, cy, cz, co = (cp.asarray(t) for t in (x, y, z, out))
        v["4 tensors: CuPy RawKernel (same tensors)"] = lambda: raw((grid,), (256,), (cx, cy, cz, co))
    except ImportError:
        pass
    for i, name in enumerate(v):
        _ORDER[name] = 100 + i
    return v


def dlpack_import(count):
    """DLPack import of a torch tensor: the C exchange API's own cost (ns per tensor, measured in C) beside
    `__dlpack__` (a capsule made and dropped, from Python), and cuasync.from_dlpack + free through each."""
    import torch
    from cuasync import _fastpath
    fast = _fastpath.get()
    x = torch.randn(1024, device="cuda")
    s = cuasync.Stream()
    rows = []
    if fast is not None and fast.exchange_version(x) is not None:
        owning, borrowed = fast.time_exchange(x, count)
        rows.append({"variant": "C exchange API: owning tensor + deleter (C loop)", "ns_per_tensor": round(owning)})
        if borrowed is not None:
            rows.append({"variant": "C exchange API: borrowed DLTensor (C loop)", "ns_per_tensor": round(borrowed)})
    try:
        x.__dlpack__(stream=-1)
        handshake = -1  # no synchronization, as the exchange API's calls
    except (TypeError, ValueError, BufferError):
        handshake = None
    t0 = time.perf_counter()
    for _ in range(count):
        x.__dlpack__(stream=handshake)
    rows.append({"variant": f"__dlpack__(stream={handshake}) capsule made and dropped (Python loop)",
                 "ns_per_tensor": round((time.perf_counter() - t0) / count * 1e9)})

    def imports(label):
        k = max(1, count // 10)
        t0 = time.perf_counter()
        for _ in range(k):
            cuasync.from_dlpack(x, stream=s).free()
        rows.append({"variant": label, "ns_per_tensor": round((time.perf_counter() - t0) / k * 1e9)})
    if fast is not None:
        imports("cuasync.from_dlpack + free, through the C exchange API")
        saved = fast.dlpack_import
        try:
            fast.dlpack_import = lambda obj: None
        except AttributeError:
            saved = None
        if saved is not None:
            imports("cuasync.from_dlpack + free, through __dlpack__ (the fast path otherwise on)")
            fast.dlpack_import = saved
    else:
        imports("cuasync.from_dlpack + free, through __dlpack__ (ctypes path)")
    s.synchronize()
    cuasync.collect()
    return rows


async def round_trips(blocks, per_block, kernel_ns, use_uvloop):
    import torch
    import cuasync.torch as ct
    mod = cuasync.compile(SPIN, "bench.cu")
    spin = mod.spin
    loop = asyncio.get_running_loop()
    s = cuasync.Stream()
    ts = torch.cuda.Stream()
    cts = cuasync.Stream.adopt(ts)

    async def cuasync_await():
        await spin.launch(s, 1, 1, kernel_ns)

    from cuasync import _loop, _queues
    looking = _loop.LoopCompletions.poll_one

    async def cuasync_await_handed_over():
        # The same await with the inline poll taking records only (take_one): every completion handed over by
        # cuasync's poller thread, as before ABI 1.7's queue_poll; alternated with the above, so the two compare.
        _loop.LoopCompletions.poll_one = _queues._Queue.take_one
        try:
            await spin.launch(s, 1, 1, kernel_ns)
        finally:
            _loop.LoopCompletions.poll_one = looking

    async def torch_synchronize():
        spin.launch_untracked(cts, 1, 1, kernel_ns)
        ts.synchronize()

    async def busy_query():
        spin.launch_untracked(cts, 1, 1, kernel_ns)
        while not ts.query():
            await asyncio.sleep(0)

    async def executor_synchronize():
        spin.launch_untracked(cts, 1, 1, kernel_ns)
        await loop.run_in_executor(None, ts.synchronize)

    variants = {"cuasync await kernel.launch()": cuasync_await,
                "cuasync await kernel.launch(), completion handed over (take_one, no queue_poll)":
                    cuasync_await_handed_over,
                "torch Stream.synchronize() (blocks the loop)": torch_synchronize,
                "busy query + asyncio.sleep(0)": busy_query,
                "run_in_executor(synchronize)": executor_synchronize}
    samples = {name: [] for name in variants}
    for b in range(blocks + 1):
        for name, f in variants.items():
            for _ in range(per_block):
                t0 = time.perf_counter()
                await f()
                if b:
                    samples[name].append((time.perf_counter() - t0) * 1e6)
            await asyncio.sleep(0.002)  # the process near idle between blocks
    base = statistics.median(samples["torch Stream.synchronize() (blocks the loop)"])
    rows = []
    for name, xs in samples.items():
        rows.append({"variant": name, "loop": "uvloop" if use_uvloop else "asyncio", "p50_us": round(pct(xs, 50), 1),
                     "p99_us": round(pct(xs, 99), 1), "p50_vs_synchronize": round(pct(xs, 50) / base, 3)})
    # The process's CPU (every thread: cuasync's too) while one 1 s kernel is awaited: the loop must sleep on the fd.
    cpu0, t0 = time.process_time(), time.perf_counter()
    await spin.launch(s, 1, 1, 1_000_000_000)
    cpu = (time.process_time() - cpu0) / (time.perf_counter() - t0)
    rows.append({"variant": "process CPU while a 1 s kernel is awaited (fraction of a core)",
                 "loop": "uvloop" if use_uvloop else "asyncio", "p50_us": None, "p99_us": None,
                 "p50_vs_synchronize": None, "cpu_fraction": round(cpu, 4)})
    return rows


def run_loop(coro_fn, use_uvloop):
    if use_uvloop:
        import uvloop
        loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(coro_fn())
    finally:
        loop.close()


def commit():
    for path in (os.environ.get("CUASYNC_COMMIT_FILE", ""), os.path.join(HERE, "..", "..", "build-gpu", "commit.txt")):
        if path and os.path.exists(path):
            return open(path).read().strip()
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    except OSError:
        return "unknown"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    rounds, calls = (5, 300) if a.quick else (15, 1000)
    blocks, per_block = (5, 40) if a.quick else (20, 100)
    _torch_ops_note[0] = native_ops()
    launches = launch_overhead(rounds, calls)
    trips = []
    for use_uvloop in (False, True):
        try:
            trips += run_loop(lambda: round_trips(blocks, per_block, 20_000, use_uvloop), use_uvloop)
        except ImportError:
            pass
    try:
        dl = dlpack_import(2000 if a.quick else 20000)
    except Exception as e:  # noqa: BLE001 - reported; the tables above stand
        dl = [{"variant": f"failed: {type(e).__name__}: {e}", "ns_per_tensor": None}]
    from cuasync import _fastpath
    fast = _fastpath.get()
    result = {"commit": commit(), "fast_path": fast.__file__ if fast is not None else None,
              "torch_cpp_op": _torch_ops_note[0], "launch_overhead": launches,
              "asyncio_round_trip_20us_kernel": trips, "dlpack_import": dl}
    md = [f"# cuasync from Python beside PyTorch and CuPy (commit {result['commit']})", "",
          f"Fast path (cuasync._fast): {result['fast_path'] or 'not in use (ctypes)'}", "",
          f"PyTorch C++ op (cuasync::scale_add): {result['torch_cpp_op']}", "",
          "Launch overhead, host time per call (1,024 floats; medians of rounds of calls, variants alternated):", "",
          "| variant | us/call p50 | p99 | vs torch.add |", "|---|---|---|---|"]
    md += [f"| {r['variant']} | {r['us_per_call_p50']} | {r['us_per_call_p99']} | {r['vs_torch_op']} |"
           for r in launches]
    md += ["", "asyncio round trip of a 20 us kernel (launch, then learn it finished):", "",
           "| loop | variant | p50 us | p99 us | p50 vs synchronize |", "|---|---|---|---|---|"]
    md += [f"| {r['loop']} | {r['variant']} | {r['p50_us']} | {r['p99_us']} | {r['p50_vs_synchronize']} |"
           if "cpu_fraction" not in r else f"| {r['loop']} | {r['variant']} | {r['cpu_fraction']} | | |"
           for r in trips]
    md += ["", "DLPack import of a torch tensor (1,024 floats):", "", "| variant | ns per tensor |", "|---|---|"]
    md += [f"| {r['variant']} | {r['ns_per_tensor']} |" for r in dl]
    text = "\n".join(md) + "\n"
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
