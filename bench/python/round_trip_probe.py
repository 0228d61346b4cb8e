# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Where an awaited launch's round trip goes, from Python (a probe, not a benchmark: it prints medians of each
stage on the machine it runs on). 20 us kernel unless --ns says otherwise.

  launch only        : the Python call of a tracked launch (the completion registered, nothing awaited)
  untracked launch   : the Python call of an untracked launch
  raw drain          : launch + spin on the loop queue's drain (no asyncio) until its record arrives
  event query        : launch + record a pooled event + spin on its query (no engine, no queue)
  asyncio await      : `await kernel.launch()` on the default loop
"""
import argparse
import asyncio
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "plugins", "python"))
import cuasync  # noqa: E402
from cuasync import _capi, _queues  # noqa: E402

SRC = r"""
extern "C" __global__ void spin(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < ns);
}"""


def med(xs):
    return round(statistics.median(xs), 1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ns", type=int, default=20000)
    p.add_argument("-n", type=int, default=2000)
    a = p.parse_args()
    k = cuasync.compile(SRC, "probe.cu").spin
    s = cuasync.Stream()
    ns, n = a.ns, a.n
    out = {}

    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        k.launch_untracked(s, 1, 1, ns)
        t.append((time.perf_counter() - t0) * 1e6)
        s.synchronize()
    out["untracked launch (call only)"] = med(t)

    q = _queues._Queue()
    t, tl = [], []
    for _ in range(n):
        done = []
        t0 = time.perf_counter()
        blob = k._blob(s, 1, 1, (ns,), 0, 0)[0]
        c = q.completion(lambda code, cr: done.append(1))
        import struct
        struct.pack_into("<QQ", blob, _capi.LaunchArgs.completion.offset, c.queue, c.token)
        _capi.call_code_at("launch", ctypes.addressof(blob))
        t1 = time.perf_counter()
        while not done:
            q.drain()
        t.append((time.perf_counter() - t0) * 1e6)
        tl.append((t1 - t0) * 1e6)
    out["tracked launch with completion (call only)"] = med(tl)
    out["raw drain round trip"] = med(t)

    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        k.launch_untracked(s, 1, 1, ns)
        e = s.record()
        while not e.query():
            pass
        t.append((time.perf_counter() - t0) * 1e6)
    out["untracked launch + event query spin"] = med(t)

    async def aw():
        t = []
        for _ in range(n):
            t0 = time.perf_counter()
            await k.launch(s, 1, 1, ns)
            t.append((time.perf_counter() - t0) * 1e6)
        return t
    out["asyncio await kernel.launch()"] = med(asyncio.run(aw()))

    async def aw_parts():
        t_call, t_total = [], []
        for _ in range(n):
            t0 = time.perf_counter()
            f = k.launch(s, 1, 1, ns)
            t1 = time.perf_counter()
            await f
            t_call.append((t1 - t0) * 1e6)
            t_total.append((time.perf_counter() - t0) * 1e6)
        return t_call, t_total
    c, tt = asyncio.run(aw_parts())
    out["asyncio: launch() call"] = med(c)
    out["asyncio: total"] = med(tt)
    for kname, v in out.items():
        print(f"{kname:45s} {v:8.1f} us")


if __name__ == "__main__":
    main()
