#!/usr/bin/python3
"""The `cuasync` command's contract, for CTest: every subcommand's --help, --json output that parses, and the
exit statuses its help documents (0 ok, 1 failure, 2 usage, 3 no usable GPU). Standard library only.

usage: check_cli.py CUASYNC SIMULATED_LIBCUDA TRACE_JSON
Scratch files go to a temporary folder, not the build tree (CTest no_link_time_cuda reads the build tree meanwhile).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

tool, simulated_libcuda, recorded_trace = sys.argv[1:4]
work = tempfile.mkdtemp(prefix="cuasync_check_cli_")
failures = []
env = dict(os.environ, CUASYNC_CACHE_DIR=os.path.join(work, "cache"))
env.pop("CUASYNC_TRACE", None)
no_gpu_env = dict(env, CUASYNC_LIBCUDA=os.path.join(work, "no-such-libcuda.so.1"))  # no GPU, even on a GPU machine
simulated_env = dict(env, CUASYNC_LIBCUDA=simulated_libcuda)


def run(args, status, environment=None, stdin=None):
    """Runs the tool; records a failure unless it exits with `status`. Returns (stdout, stderr)."""
    p = subprocess.run([tool] + args, capture_output=True, text=True, env=environment or env, timeout=120)
    if p.returncode != status:
        failures.append(f"cuasync {' '.join(args)}: exit {p.returncode}, expected {status}\n"
                        f"  stdout: {p.stdout[-2000:]}\n  stderr: {p.stderr[-2000:]}")
    return p.stdout, p.stderr


def run_json(args, status, environment=None):
    """Runs the tool with --json; its standard output must be exactly one JSON object."""
    out, _ = run(args + ["--json"], status, environment)
    try:
        value = json.loads(out)
    except ValueError as e:
        failures.append(f"cuasync {' '.join(args)} --json: not JSON ({e}): {out[:500]!r}")
        return {}
    if not isinstance(value, dict):
        failures.append(f"cuasync {' '.join(args)} --json: not an object")
        return {}
    return value


def check(condition, what):
    if not condition:
        failures.append(what)


def check_error(value, status, kind, what):
    error = value.get("error", {})
    check(error.get("status") == status and error.get("kind") == kind and error.get("message"),
          f"{what}: expected an error object with status {status} and kind {kind}, got {value}")


# --help: the same shape everywhere, with the exit statuses; `cuasync help CMD` says the same.
for command in ["info", "compile", "trace"]:
    out, _ = run([command, "--help"], 0)
    check(out.startswith(f"usage: cuasync {command}"), f"{command} --help does not start with its usage")
    for text in ["--json", "exit status:", "0  success", "1  failure", "2  usage error", "3  no usable GPU"]:
        check(text in out, f"{command} --help lacks {text!r}")
    same, _ = run(["help", command], 0)
    check(same == out, f"'cuasync help {command}' differs from '{command} --help'")
    run([command, "-h"], 0)
out, _ = run(["--help"], 0)
for text in ["usage: cuasync <command>", "info", "compile", "trace", "exit status:", "3  no usable GPU"]:
    check(text in out, f"cuasync --help lacks {text!r}")
check(run(["help"], 0)[0] == out, "'cuasync help' differs from 'cuasync --help'")

# Usage errors: status 2, with --json an error object.
run([], 2)
run(["no-such-command"], 2)
check_error(run_json(["no-such-command"], 2), 2, "usage", "an unknown command")
run(["help", "no-such-command"], 2)
for command in ["info", "compile", "trace"]:
    check_error(run_json([command, "--no-such-option"], 2), 2, "usage", f"{command} --no-such-option")
check_error(run_json(["compile"], 2), 2, "usage", "compile without a file")
check_error(run_json(["trace"], 2), 2, "usage", "trace without a file")
check_error(run_json(["trace", recorded_trace, "--device", "x"], 2), 2, "usage", "trace --device x")
check(run_json(["--version"], 0).get("version"), "--version --json has no version")

# info: no GPU is status 3 with its reason; on the simulated libcuda, the devices.
run(["info"], 3, no_gpu_env)
check_error(run_json(["info"], 3, no_gpu_env), 3, "no_gpu", "info without a driver")
out, _ = run(["info"], 0, simulated_env)
check("device 0:" in out, "info on the simulated driver shows no device 0")
info = run_json(["info"], 0, simulated_env)
devices = info.get("devices", [])
check(info.get("device_count", 0) >= 1 and len(devices) == info.get("device_count"),
      f"info --json: device_count and devices disagree: {info}")
check(all("async_engine_count" in d and "compute_capability" in d for d in devices), "info --json lacks attributes")
check("peer access (row device can access column device's memory)" in out, "info shows no peer-access matrix")
peers = info.get("peer_access", [])
check(len(peers) == len(devices) and all(len(r) == len(devices) for r in peers),
      f"info --json: peer_access is not a device_count square: {peers}")
check(all(peers[i][i] is False for i in range(len(peers))), "info --json: a device is its own peer")

# compile: needs NVRTC, not a GPU. A cold compile, then a disk hit in a second process; a compile error is 1.
kernel = os.path.join(work, "scale.cu")
with open(kernel, "w") as f:
    f.write('template <class T> __global__ void scale(T* x, T a, int n) {\n'
            '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n')
args = ["compile", kernel, "--arch", "sm_90", "--name-expression", "scale<float>"]
cold = run_json(args, 0, no_gpu_env)
if cold.get("error", {}).get("kind") == "nvrtc_error":
    print(f"check_cli: NVRTC did not load, compile checked for its error only: {cold['error']['message']}")
else:
    check(cold.get("cache", {}).get("outcome") == "miss", f"compile --json: first outcome {cold.get('cache')}")
    check(cold.get("target", {}).get("architecture") == "sm_90" and cold["target"].get("kind") == "cubin",
          f"compile --json: target {cold.get('target')}")
    check("scale<float>" in cold.get("lowered_names", {}), f"compile --json: lowered names {cold.get('lowered_names')}")
    check(cold.get("image_bytes", 0) > 0, "compile --json: empty image")
    hit = run_json(args, 0, no_gpu_env)
    check(hit.get("cache", {}).get("outcome") == "disk_hit", f"compile --json: second outcome {hit.get('cache')}")
    run(args, 0, no_gpu_env)
    broken = os.path.join(work, "broken.cu")
    with open(broken, "w") as f:
        f.write("__global__ void k() { this is not C++; }\n")
    error = run_json(["compile", broken, "--arch", "sm_90"], 1, no_gpu_env)
    check_error(error, 1, "compile_error", "a compile error")
    check(error.get("error", {}).get("log"), "a compile error without NVRTC's log")
check_error(run_json(["compile", os.path.join(work, "missing.cu")], 1), 1, "io_error", "compile of a missing file")

# trace: the committed trace renders and summarizes; unreadable and malformed traces are 1.
page = os.path.join(work, "timeline.html")
out, _ = run(["trace", recorded_trace, "-o", page], 0, no_gpu_env)
check("critical stage: compute" in out and os.path.getsize(page) > 1000, "trace: no summary or no page")
summary = run_json(["trace", recorded_trace, "-o", page], 0, no_gpu_env)
check(summary.get("spans") == 31 and summary.get("lanes") == 7 and summary.get("html") == page,
      f"trace --json: {summary}")
check(summary.get("summary", {}).get("critical") == "compute", "trace --json: critical stage")
only = run_json(["trace", recorded_trace, "--no-html", "--device", "1"], 0)
check(only.get("html") is None and only.get("summary", {}).get("critical") == "none", f"trace --device 1: {only}")
check_error(run_json(["trace", os.path.join(work, "missing.json")], 1), 1, "io_error", "trace of a missing file")
bad = os.path.join(work, "bad.json")
with open(bad, "w") as f:
    f.write('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": -5}]}')
check_error(run_json(["trace", bad, "--no-html"], 1), 1, "bad_trace", "trace of a malformed trace")

shutil.rmtree(work, ignore_errors=True)
for f in failures:
    print("FAIL:", f)
print(f"check_cli: {len(failures)} failures")
sys.exit(1 if failures else 0)
