#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs a command; if it is still running after SECONDS, every thread of it prints its own call stack (SIGUSR2: the
# test executables' handler, tests/support/test_main.cpp, prints "== thread N ==" and the frames to stderr) and the
# threads' names and kernel wait channels are listed, then it is killed. For hangs on the GPU machine, which has no
# debugger. Resolve the frames with `addr2line -f -C -e BINARY OFFSET` against the same build.
# Usage: scripts/stacks-on-hang.sh SECONDS LOG COMMAND [ARGS...]   (exit status: the command's, or 124 after a dump)
set -u
secs=${1:?usage: stacks-on-hang.sh SECONDS LOG COMMAND...}
log=${2:?usage: stacks-on-hang.sh SECONDS LOG COMMAND...}
shift 2
"$@" > "$log" 2>&1 &
pid=$!
for _ in $(seq 1 "$secs"); do
  sleep 1
  kill -0 "$pid" 2> /dev/null || { wait "$pid"; exit $?; }
done
echo "stacks-on-hang: still running after ${secs}s; every thread's stack follows in $log" >&2
{
  echo "== threads (tid, name, kernel wait channel) =="
  for t in /proc/"$pid"/task/*; do echo "$(basename "$t") $(cat "$t/comm") $(cat "$t/wchan" 2> /dev/null)"; done
} >> "$log.threads"
# tgkill(pid, tid, SIGUSR2) for each thread in turn (kill(1) signals the process, which one thread would take).
python3 - "$pid" << 'PY'
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pid = int(sys.argv[1])
for tid in sorted(os.listdir(f"/proc/{pid}/task"), key=int):
    libc.syscall(234, pid, int(tid), int(signal.SIGUSR2))  # SYS_tgkill on x86-64
    time.sleep(0.3)
PY
sleep 1
kill -9 "$pid" 2> /dev/null
wait "$pid" 2> /dev/null
exit 124
