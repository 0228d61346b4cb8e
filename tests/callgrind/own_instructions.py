#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""A callgrind dump's instructions split into the simulated driver's and everything else's (cuasync, Asio, libc on our
behalf), per operation: a call from outside the simulated driver's library into it counts its inclusive cost as the
driver's, so what remains is what our code costs a thread whatever the driver costs. Also lists the driver entry
points called per operation.

Usage: own_instructions.py DUMP OPERATIONS   (DUMP: a callgrind.out.<n>-<thread> file)
"""
import collections
import sys

from count_locks import name_resolver

SIM = "simulated_libcuda"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dump, ops = sys.argv[1], int(sys.argv[2])
    resolve = name_resolver()
    ob = cob = cfn = None
    total = 0
    driver = 0
    entries = collections.Counter()
    pending_call = None

    with open(dump, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("ob="):
                ob = resolve("ob", line[3:])
                cob = None
            elif line.startswith("fl=") or line.startswith("fi=") or line.startswith("fe="):
                continue
            elif line.startswith("fn="):
                resolve("fn", line[3:])
                cob = None
            elif line.startswith("cob="):
                cob = resolve("ob", line[4:])
            elif line.startswith("cfn="):
                cfn = resolve("fn", line[4:])
            elif line.startswith("calls="):
                pending_call = (int(line[6:].split()[0]), cob if cob is not None else ob, cfn)
            elif line.startswith("totals:") or line.startswith("summary:"):
                if line.startswith("summary:") or total == 0:
                    total = int(line.split()[1])
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                if pending_call is not None:
                    n, callee_ob, callee = pending_call
                    cost = int(line.split()[-1])
                    if SIM in (callee_ob or "") and SIM not in (ob or ""):
                        driver += cost
                        entries[callee] += n
                    pending_call = None
                    cob = None
    print(f"total: {total / ops:.0f} instructions per operation")
    print(f"simulated driver (calls into it, inclusive): {driver / ops:.0f}")
    print(f"ours (the rest): {(total - driver) / ops:.0f}")
    for fn, n in entries.most_common():
        print(f"  {n / ops:6.2f}  {fn}")


if __name__ == "__main__":
    main()
