#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Mutex acquisitions in a callgrind dump (tests/callgrind/awaited_launch_loop.cpp's): calls into pthread's lock
functions from code outside libc, grouped by the calling function, per operation.

Usage: count_locks.py DUMP OPERATIONS [--all] [--most N]   (DUMP: a callgrind.out.<n>-<thread> file; --all lists
every caller; --most N exits 1 when cuasync's own lock calls per operation are above N, e.g. CTest
callgrind_c_abi_launch_locks on callgrind_c_abi_launch's dump)
"""
import collections
import re
import signal
import sys

LOCKS = re.compile(r"^(__)?_*pthread_(mutex_lock|mutex_trylock|rwlock_rdlock|rwlock_wrlock|spin_lock)(@.*)?$")


def name_resolver():
    """Callgrind compresses names: "(n) name" the first time, "(n)" after; the function resolves both, per kind."""
    names = {"fn": {}, "ob": {}}

    def resolve(kind, value):
        m = re.match(r"\((\d+)\)(?: (.*))?$", value)
        if not m:
            return value
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), value)

    return resolve


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dump, ops = sys.argv[1], int(sys.argv[2])
    resolve = name_resolver()
    ob = fn = cfn = None
    by_caller = collections.Counter()

    with open(dump, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                ob = resolve("ob", line[3:])
            elif line.startswith("fn="):
                fn = resolve("fn", line[3:])
            elif line.startswith("cob="):
                resolve("ob", line[4:])
            elif line.startswith("cfn="):
                cfn = resolve("fn", line[4:])
            elif line.startswith("calls=") and cfn is not None:
                n = int(line[6:].split()[0])
                if LOCKS.match(cfn) and not re.search(r"/libc[.-]", ob or ""):
                    where = "simulated driver" if "simulated_libcuda" in (ob or "") else "cuasync, Asio, libstdc++"
                    by_caller[(where, fn)] += n
                cfn = None
    totals = collections.Counter()
    for (where, _), n in by_caller.items():
        totals[where] += n
    for where, n in sorted(totals.items()):
        print(f"{where}: {n} lock calls, {n / ops:.2f} per operation")
    limit = None if "--all" in sys.argv else 25
    for (where, fn), n in by_caller.most_common(limit):
        print(f"  {n / ops:6.2f}  [{where}] {fn}")
    if "--most" in sys.argv:
        most = float(sys.argv[sys.argv.index("--most") + 1])
        own = totals["cuasync, Asio, libstdc++"] / ops
        if own > most:
            sys.exit(f"count_locks: {own:.2f} of cuasync's lock calls per operation, more than {most}")


if __name__ == "__main__":
    main()
