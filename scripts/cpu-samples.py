#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Sums the stacks a benchmark's cpu_sampler wrote (CUASYNC_BENCH_SAMPLES, bench/common/cpu_sampler.hpp).

Usage: scripts/cpu-samples.py SAMPLES BUILD_DIR [--top N] [--label L] [--libc-symbols NM_OUTPUT]
For each label: samples per thread, then per busy thread the functions that were running (self) and those on the
stack (inclusive), in percent of that thread's samples. Objects of BUILD_DIR (the same build that ran) are resolved
with addr2line; libc by the GPU machine's own symbols when given (`nm -D --defined-only` of its libc.so.6, brought
back with the samples: this machine's libc differs); others (libcuda) are named by object only.
"""
import bisect
import argparse
import collections
import os
import subprocess


def find_objects(build):
    found = {}
    for root, _, files in os.walk(build):
        for f in files:
            found.setdefault(f, os.path.join(root, f))
    return found


def libc_namer(nm_output):
    """nm -D output of a libc -> a function naming an offset by the nearest symbol at or below it."""
    symbols = []
    for line in open(nm_output):
        p = line.split()
        if len(p) >= 3 and p[1] in "TtWiw" and len(p[0]) == 16:
            symbols.append((int(p[0], 16), p[2].split("@")[0]))
    symbols.sort()
    starts = [a for a, _ in symbols]

    def name(offset):
        i = bisect.bisect_right(starts, offset) - 1
        return "libc: " + symbols[i][1] if i >= 0 else "libc.so.6"
    return name


def resolve(objects, wanted, libc=None):
    """wanted: {object: set(offsets)} -> {(object, offset): function}"""
    names = {}
    for obj, offsets in wanted.items():
        path = objects.get(obj)
        offsets = sorted(offsets)
        if libc and obj.startswith("libc.so"):
            for o in offsets:
                names[(obj, o)] = libc(o)
            continue
        if not path:
            for o in offsets:
                names[(obj, o)] = obj
            continue
        out = subprocess.run(["addr2line", "-f", "-C", "-e", path] + [hex(o) for o in offsets],
                             capture_output=True, text=True).stdout.splitlines()
        for i, o in enumerate(offsets):
            fn = out[2 * i] if 2 * i < len(out) else "??"
            names[(obj, o)] = fn if fn != "??" else obj + "?"
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("samples")
    ap.add_argument("build")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--label")
    ap.add_argument("--libc-symbols", help="nm -D --defined-only of the GPU machine's libc.so.6")
    a = ap.parse_args()
    stacks = collections.defaultdict(list)  # label -> [(tid, [(obj, off)])]
    for line in open(a.samples):
        parts = line.split()
        if len(parts) < 2 or (a.label and parts[0] != a.label):
            continue
        frames = []
        for i, f in enumerate(parts[2:]):
            obj, _, off = f.rpartition("+")
            off = int(off, 16) if off.startswith("0x") else 0
            frames.append((obj, off - 1 if i > 0 and off else off))  # return addresses: the call is before
        stacks[parts[0]].append((int(parts[1]), frames))
    wanted = collections.defaultdict(set)
    for items in stacks.values():
        for _, frames in items:
            for obj, off in frames:
                wanted[obj].add(off)
    names = resolve(find_objects(a.build), wanted, libc_namer(a.libc_symbols) if a.libc_symbols else None)
    for label, items in stacks.items():
        per_thread = collections.Counter(t for t, _ in items)
        print(f"== {label}: {len(items)} samples; per thread: " +
              ", ".join(f"{t}: {n}" for t, n in per_thread.most_common(6)))
        for tid, n in per_thread.most_common(3):
            if n < 0.05 * len(items):
                continue
            own = collections.Counter()
            incl = collections.Counter()
            for t, frames in items:
                if t != tid or not frames:
                    continue
                fns = [names[f] for f in frames]
                own[fns[0]] += 1
                for fn in set(fns):
                    incl[fn] += 1
            print(f"-- thread {tid} ({n} samples): self")
            for fn, c in own.most_common(a.top):
                print(f"  {100 * c / n:5.1f}%  {fn[:150]}")
            print(f"-- thread {tid}: inclusive")
            for fn, c in incl.most_common(a.top):
                print(f"  {100 * c / n:5.1f}%  {fn[:150]}")


if __name__ == "__main__":
    main()
