# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The host timeline of an awaited tracked launch of a 20 us kernel beside an untracked launch + torch synchronize()
and a tracked launch outside a loop + Pending.wait(): when each driver call began and ended, relative to the call's
start (medians over alternated samples), on the default loop and uvloop. Needs the driver shim beside it:
  gcc -O2 -shared -fPIC -o /tmp/libdriver_timestamps.so bench/python/timeline/driver_timestamps.c -ldl
  CUASYNC_LIBCUDA=/tmp/libdriver_timestamps.so PYTHONPATH=plugins/python python3 bench/python/timeline/await_timeline.py
It found the ~3 us of Python that ran before cuLaunchKernelEx in an awaited launch (bench/results/h100-session20)."""
import asyncio, ctypes, os, statistics, sys, time, threading, collections
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
shim = ctypes.CDLL(os.environ["CUASYNC_LIBCUDA"])
import torch, cuasync
from bench_frameworks import SPIN
NAMES = {1: "cuLaunchKernelEx", 2: "cuEventRecord", 3: "cuStreamWriteValue64", 4: "cuEventQuery", 5: "cuStreamGetId",
         6: "cuThreadExchangeStreamCaptureMode", 7: "cuStreamIsCapturing", 8: "cuCtxGetCurrent", 9: "cuCtxPushCurrent",
         10: "cuCtxPopCurrent", 11: "cuCtxGetId", 12: "cuStreamGetCtx", 13: "cuEventRecordWithFlags", 14: "cuLaunchKernel"}
M = 4096
T = (ctypes.c_double * M)(); I = (ctypes.c_int * M)(); D = (ctypes.c_int * M)()
me = threading.get_native_id()
def read():
    n = shim.shim_read(T, I, D, M)
    return [(T[k], I[k], D[k]) for k in range(n)]
NS = 20000
async def main():
    mod = cuasync.compile(SPIN, "bd.cu"); spin = mod.spin
    s = cuasync.Stream(); ts = torch.cuda.Stream(); cts = cuasync.Stream.adopt(ts)
    res = {}
    async def U():
        read(); t0 = time.perf_counter(); spin.launch_untracked(cts, 1, 1, NS); t1 = time.perf_counter(); ts.synchronize(); t2 = time.perf_counter()
        return t0, t1, t2
    async def Tr():
        read(); t0 = time.perf_counter(); f = spin.launch(s, 1, 1, NS); t1 = time.perf_counter(); await f; t2 = time.perf_counter()
        return t0, t1, t2
    pd_tid = [0]
    def Pd():
        pd_tid[0] = threading.get_native_id()
        read(); t0 = time.perf_counter(); f = spin.launch(s, 1, 1, NS); t1 = time.perf_counter(); f.wait(); t2 = time.perf_counter()
        return t0, t1, t2
    for b in range(21):
        for name, fn in (("untracked + ts.synchronize", U), ("await tracked", Tr), ("tracked outside the loop + Pending.wait", None)):
            for _ in range(40):
                if fn is None:
                    t0, t1, t2 = await asyncio.get_running_loop().run_in_executor(None, Pd)
                else:
                    t0, t1, t2 = await fn()
                log = read()
                if not b: continue
                r = res.setdefault(name, {"ret": [], "end": [], "main": collections.defaultdict(list), "other": collections.Counter()})
                r["ret"].append((t1 - t0) * 1e6); r["end"].append((t2 - t0) * 1e6)
                seen = collections.Counter()
                for t, i, tid in log:
                    nm = NAMES.get(i % 100, str(i)) + (" exit" if i >= 100 else "")
                    if tid == me or (fn is None and tid == pd_tid[0]):
                        seen[nm] += 1
                        r["main"][(nm, seen[nm])].append((t - t0) * 1e6)
                    else:
                        r["other"][nm] += 1
            await asyncio.sleep(0.002)
    for name, r in res.items():
        n = len(r["ret"])
        print(f"== {name}: returns p50 {statistics.median(r['ret']):.2f} us, done p50 {statistics.median(r['end']):.2f} us ({n} samples)")
        rows = sorted(((statistics.median(v), k, len(v)) for k, v in r["main"].items()), key=lambda x: x[0])
        for med, (nm, occ), cnt in rows:
            if cnt >= n // 4:
                print(f"   {med:8.2f} us  {nm} #{occ}  (in {cnt / n:.0%} of samples)")
        print("   other threads per sample:", {k: round(v / n, 2) for k, v in r["other"].most_common(8)})
for lp in ("asyncio", "uvloop"):
    if lp == "uvloop":
        import uvloop; loop = uvloop.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    print("--", lp); loop.run_until_complete(main()); loop.close()
