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
"""


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def launch_overhead(rounds, calls):
    import torch
    import cuasync.torch as ct
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
        "cuasync::scale_add (custom op)": lambda: torch.ops.cuasync.scale_add(x, y, 2.0),
        "cuasync launch on torch's stream (untracked)": lambda: ct.launch(k, grid, 256, x, y, out, 2.0, n),
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
    for name, xs in per_call.items():
        med = statistics.median(xs)
        rows.append({"variant": name, "us_per_call_p50": round(med, 2), "us_per_call_p99": round(pct(xs, 99), 2),
                     "vs_torch_op": round(med / base, 3)})
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
    launches = launch_overhead(rounds, calls)
    trips = []
    for use_uvloop in (False, True):
        try:
            trips += run_loop(lambda: round_trips(blocks, per_block, 20_000, use_uvloop), use_uvloop)
        except ImportError:
            pass
    result = {"commit": commit(), "launch_overhead": launches, "asyncio_round_trip_20us_kernel": trips}
    md = [f"# cuasync from Python beside PyTorch and CuPy (commit {result['commit']})", "",
          "Launch overhead, host time per call (1,024 floats; medians of rounds of calls, variants alternated):", "",
          "| variant | us/call p50 | p99 | vs torch.add |", "|---|---|---|---|"]
    md += [f"| {r['variant']} | {r['us_per_call_p50']} | {r['us_per_call_p99']} | {r['vs_torch_op']} |"
           for r in launches]
    md += ["", "asyncio round trip of a 20 us kernel (launch, then learn it finished):", "",
           "| loop | variant | p50 us | p99 us | p50 vs synchronize |", "|---|---|---|---|---|"]
    md += [f"| {r['loop']} | {r['variant']} | {r['p50_us']} | {r['p99_us']} | {r['p50_vs_synchronize']} |"
           for r in trips]
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
