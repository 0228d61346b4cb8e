#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The `cuasync` command's contract, for CTest: every subcommand's --help, --json output that parses, the exit
statuses its help documents (0 ok, 1 failure, 2 usage, 3 no usable GPU), --opt=value as well as --opt value, the
nearest name for a typo, errors without cuasync's own source lines (unless CUASYNC_DEBUG=1), and the README's
synopses equal to the usage lines the help prints. Standard library only.

usage: check_cli.py CUASYNC SIMULATED_LIBCUDA TRACE_JSON README
Scratch files go to a temporary folder, not the build tree (CTest no_link_time_cuda reads the build tree meanwhile).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

tool, simulated_libcuda, recorded_trace, readme = sys.argv[1:5]
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


def run_json(args, status, environment=None, json_first=False):
    """Runs the tool with --json (after the arguments, or before them: `cuasync --json info`); its standard output
    must be exactly one JSON object."""
    command = ["--json"] + args if json_first else args + ["--json"]
    out, _ = run(command, status, environment)
    try:
        value = json.loads(out)
    except ValueError as e:
        failures.append(f"cuasync {' '.join(command)}: not JSON ({e}): {out[:500]!r}")
        return {}
    if not isinstance(value, dict):
        failures.append(f"cuasync {' '.join(command)}: not an object")
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
commands = ["info", "compile", "demo", "doctor", "bench", "trace"]
for command in commands:
    out, _ = run([command, "--help"], 0)
    check(out.startswith(f"usage: cuasync {command}"), f"{command} --help does not start with its usage")
    for text in ["--json", "exit status:", "0  success", "1  failure", "2  usage error", "3  no usable GPU"]:
        check(text in out, f"{command} --help lacks {text!r}")
    same, _ = run(["help", command], 0)
    check(same == out, f"'cuasync help {command}' differs from '{command} --help'")
    run([command, "-h"], 0)
out, _ = run(["--help"], 0)
for text in ["usage: cuasync <command>", "exit status:", "3  no usable GPU"] + commands:
    check(text in out, f"cuasync --help lacks {text!r}")
check(run(["help"], 0)[0] == out, "'cuasync help' differs from 'cuasync --help'")


def usage_of(command):
    """The usage line `cuasync COMMAND --help` prints (wrapped lines joined), without "usage: "."""
    lines = run([command, "--help"], 0)[0].splitlines()
    usage = [lines[0]]
    for line in lines[1:]:
        if not line.startswith(" "):
            break
        usage.append(line)
    return " ".join(" ".join(usage).split())[len("usage: "):]


# The README's Commands section shows each command's synopsis as its --help prints it (written once: in the
# options the command declares).
with open(readme, encoding="utf-8") as f:
    section = re.search(r"^## Commands\n(.*?)(?=^## )", f.read(), re.S | re.M)
check(section, f"{readme} has no '## Commands' section")
synopses = [" ".join(span.split()) for span in re.findall(r"`(cuasync [^`]*)`", section.group(1) if section else "")]
for command in commands:
    usage = usage_of(command)
    shown = [s for s in synopses if s.split()[1:2] == [command]]
    check(shown and shown[0] == usage,
          f"README's Commands section: the synopsis of {command} is {shown[:1]}, its --help says `{usage}`")
    # Every option the usage lists is in the help's option list, and every listed one is in the usage.
    out, _ = run([command, "--help"], 0)
    for option in re.findall(r"\[(--?[a-zA-Z][-a-zA-Z]*)", usage):
        check(re.search(rf"^  (-\w, )?{re.escape(option)}\b", out, re.M), f"{command} --help: {option} not listed")

# Typos: the nearest command or option is named, in the message and in the JSON error.
_, err = run(["infoo"], 2)
check("did you mean info?" in err, f"cuasync infoo: no suggestion: {err}")
check("did you mean info?" in run_json(["infoo"], 2).get("error", {}).get("message", ""), "--json infoo: no suggestion")
check("did you mean help?" in run(["hlep"], 2)[1], "cuasync hlep: no suggestion")
check("did you mean info?" in run(["help", "infoo"], 2)[1], "cuasync help infoo: no suggestion")
for args, near in ((["demo", "--slotz", "3"], "--slots"), (["demo", "--slotz=3"], "--slots"),
                   (["compile", "--arhc=sm_90", "x.cu"], "--arch"), (["compile", "-arch", "sm_90", "x.cu"], "--arch"),
                   (["trace", "x.json", "--no-htm"], "--no-html"), (["bench", "--suite", "drivr"], "driver"),
                   (["doctor", "--devcie", "0"], "--device"), (["--jsn", "info"], "--json")):
    _, err = run(args, 2)
    check(f"did you mean {near}?" in err, f"cuasync {' '.join(args)}: no suggestion of {near}: {err}")
check("did you mean" not in run(["demo", "--completely-else"], 2)[1], "a suggestion for a word like no option")

# Usage errors: status 2, with --json an error object.
run([], 2)
run(["no-such-command"], 2)
check_error(run_json(["no-such-command"], 2), 2, "usage", "an unknown command")
run(["help", "no-such-command"], 2)
for command in commands:
    check_error(run_json([command, "--no-such-option"], 2), 2, "usage", f"{command} --no-such-option")
for args in (["demo", "--slots", "0"], ["demo", "--requests", "x"], ["demo", "--out"], ["doctor", "--device", "x"],
             ["bench", "--suite", "no-such-suite"], ["bench", "--timeout", "0"], ["demo", "--slots=0"],
             ["demo", "--requests=x"], ["demo", "--rounds=101"], ["demo", "--mib=0"], ["demo", "--watchdog=-1"],
             ["demo", "--device=x"], ["doctor", "--device=x"], ["bench", "--suite=no-such-suite"],
             ["bench", "--timeout=0"], ["trace", recorded_trace, "--device=-1"], ["compile", "x.cu", "--arch=sm_x"],
             ["compile", "x.cu", "--max-registers=0"], ["compile", "x.cu", "--ptx", "--ltoir"],
             ["info", "unexpected"], ["compile", "a.cu", "b.cu"]):
    check_error(run_json(args, 2), 2, "usage", " ".join(args))
    message = run_json(args, 2).get("error", {}).get("message", "")
    check(".cpp:" not in message and " in cuasync::" not in message, f"{' '.join(args)}: a source line: {message}")
check_error(run_json(["compile"], 2), 2, "usage", "compile without a file")
check(run_json(["compile"], 2).get("error", {}).get("message") == "no FILE.cu given", "compile without a file: message")
check(run_json(["demo", "--out"], 2).get("error", {}).get("message") == "--out needs DIR", "demo --out: message")
check_error(run_json(["trace"], 2), 2, "usage", "trace without a file")
check_error(run_json(["trace", recorded_trace, "--device", "x"], 2), 2, "usage", "trace --device x")
check(run_json(["--version"], 0).get("version"), "--version --json has no version")

# --json before the command, as users type it (`cuasync --json info`), means the same as after it.
for command in commands:
    check_error(run_json([command, "--no-such-option"], 2, json_first=True), 2, "usage",
                f"--json {command} --no-such-option")
check_error(run_json(["no-such-command"], 2, json_first=True), 2, "usage", "--json no-such-command")
check_error(run_json([], 2, json_first=True), 2, "usage", "--json without a command")
check_error(run_json(["--no-such-option"], 2, json_first=True), 2, "usage", "--json --no-such-option")
check(run_json(["--version"], 0, json_first=True).get("version"), "--json --version has no version")
check(run(["--json", "--help"], 0)[0] == run(["--help"], 0)[0], "'cuasync --json --help' differs from 'cuasync --help'")
check(run(["--json", "help", "info"], 0)[0] == run(["info", "--help"], 0)[0],
      "'cuasync --json help info' differs from 'info --help'")
check_error(run_json(["info"], 3, no_gpu_env, json_first=True), 3, "no_gpu", "--json info without a driver")
check(run_json(["info"], 0, simulated_env, json_first=True).get("device_count", 0) >= 1,
      "--json info on the simulated driver")
for command in ["doctor", "bench"]:
    check_error(run_json([command], 3, no_gpu_env, json_first=True), 3, "no_gpu", f"--json {command} without a GPU")
check_error(run_json(["compile", os.path.join(work, "missing.cu")], 1, json_first=True), 1, "io_error",
            "--json compile of a missing file")
check(run_json(["trace", recorded_trace, "--no-html"], 0, json_first=True).get("spans") == 31,
      "--json trace of the recorded trace")

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

# info's JIT side, with a GPU or without: NVRTC (loaded or why not) and the disk cache.
for value, where in ((info, "on the simulated driver"), (run_json(["info"], 3, no_gpu_env), "without a GPU")):
    nvrtc, cache = value.get("nvrtc", {}), value.get("jit_cache", {})
    check("loaded" in nvrtc and (nvrtc.get("supported_archs", 0) > 0 or nvrtc.get("error")),
          f"info --json {where}: nvrtc {nvrtc}")
    check(cache.get("directory") and "entries" in cache and "bytes" in cache, f"info --json {where}: jit_cache {cache}")
out, err = run(["info"], 3, no_gpu_env)
check("NVRTC" in out and "disk cache" in out, f"info without a GPU does not show NVRTC and the cache: {out}")
check((out + err).count("no usable GPU") == 1 and (out + err).count("no-such-libcuda.so.1': ") == 1,
      f"info without a GPU does not say why exactly once: {out} {err}")

# demo without a GPU: the JIT part (cold, then the caches), "no GPU: <reason>", status 3.
# The reason is said once (on standard error, after the JIT part's figures on standard output), and no GPU is assumed:
# the JIT part states its target and why.
out, err = run(["demo"], 3, no_gpu_env)
both = out + err
check(both.count("no usable GPU") == 1 and both.count("no-such-libcuda.so.1': ") == 1 and "JIT" in out,
      f"demo without a GPU does not say why exactly once: {out} {err}")
check(not re.search(r"H100|H200|A100|the GPU's architecture", both), f"demo without a GPU assumes a GPU: {out}")
demo = run_json(["demo"], 3, no_gpu_env)
check_error(demo, 3, "no_gpu", "demo without a GPU")
check(demo.get("error", {}).get("message", "").startswith("no usable GPU: ") and demo.get("gpu") is None,
      f"demo --json without a GPU: {demo.get('error')}")
jit = demo.get("jit", {})
if jit.get("nvrtc", {}).get("loaded"):
    check(re.fullmatch(r"CUBIN sm_\d+", jit.get("target", "")) and "oldest architecture" in jit.get("target_reason", "")
          and f"{jit.get('target')} (no GPU to match: the oldest architecture" in out,
          f"demo without a GPU: the JIT target and its reason: {jit.get('target')} ({jit.get('target_reason')})")
nvrtc_present = jit.get("nvrtc", {}).get("loaded")
if nvrtc_present:
    check(jit.get("cold_ms", 0) > 0 and jit.get("memory_hit_ms", 1e9) < jit["cold_ms"] and
          jit.get("image_bytes", 0) > 0, f"demo --json: the JIT part's times: {jit}")
    check(jit.get("disk_cache", {}).get("first_outcome") == "disk hit" and jit["disk_cache"].get("hit_ms", 1e9) <
          jit["cold_ms"], f"demo --json: the disk cache (its entry stored by the run before): {jit.get('disk_cache')}")
    cold = run_json(["demo"], 3, dict(no_gpu_env, CUASYNC_CACHE_DIR=os.path.join(work, "fresh-cache")))
    check(cold.get("jit", {}).get("disk_cache", {}).get("first_outcome") == "miss",
          f"demo --json with an empty disk cache: {cold.get('jit')}")
    off = run_json(["demo"], 3, dict(no_gpu_env, CUASYNC_CACHE="0"))
    check(off.get("jit", {}).get("disk_cache", {}).get("enabled") is False,
          f"demo with CUASYNC_CACHE=0: {off.get('jit')}")
else:
    print(f"check_cli: NVRTC did not load, demo's JIT part checked for its message only: {jit}")
    check(jit.get("nvrtc", {}).get("error"), f"demo --json without NVRTC gives no reason: {jit}")

# demo on the simulated driver: it runs no kernel it does not know, so every response is wrong, and the demo must
# say so and fail (status 1); everything else (slots, coroutines, the traced run, the files) runs as on a GPU.
if nvrtc_present:
    outdir = os.path.join(work, "demo-out")
    args = ["demo", "--ptx", "--requests", "6", "--rounds", "1", "--mib", "1", "--out", outdir]
    # The same with --opt=value: the values reach the run (its request count, its files).
    eq_outdir = os.path.join(work, "demo-out-eq")
    eq = run_json(["demo", "--ptx", "--requests=6", "--rounds=1", "--mib=1", "--slots=2", "--watchdog=0",
                   "--device=0", f"--out={eq_outdir}"], 1, simulated_env)
    check((eq.get("gpu") or {}).get("pipelined", {}).get("requests") == 6 and
          (eq.get("gpu") or {}).get("pipelined", {}).get("slots") == 2 and (eq.get("gpu") or {}).get("watchdog") is None
          and os.path.getsize(os.path.join(eq_outdir, "timeline.html")) > 1000, f"demo --opt=value: {eq.get('gpu')}")
    sim = run_json(args, 1, simulated_env)
    check_error(sim, 1, "wrong_result", "demo on the simulated driver (kernels that do nothing)")
    gpu = sim.get("gpu") or {}
    check(gpu.get("verified") is False and gpu.get("pipelined", {}).get("requests") == 6 and
          gpu.get("serial", {}).get("slots") == 1 and "overlap" in gpu and "diagnostics" in gpu,
          f"demo --json on the simulated driver: {gpu}")
    check(os.path.getsize(os.path.join(outdir, "trace.json")) > 0 and
          os.path.getsize(os.path.join(outdir, "timeline.html")) > 1000, "demo wrote no trace.json or timeline.html")
    out, err = run(args, 1, simulated_env)
    check("WRONG RESPONSES" in out and "WRONG RESPONSES" in err, f"demo's wrong responses are not loud: {out} {err}")
    doctor = run_json(["doctor", "--ptx"], 1, simulated_env)
    check(doctor.get("verdict") == "FAIL" and doctor.get("failures") and doctor.get("copy_engines", 0) >= 1 and
          doctor.get("await_empty_kernel", {}).get("samples") == 500, f"doctor on the simulated driver: {doctor}")

# doctor and bench need a GPU: status 3 with the reason, once.
for command in ["doctor", "bench"]:
    out, err = run([command], 3, no_gpu_env)
    check((out + err).count("no usable GPU") == 1, f"{command} without a GPU: {out} {err}")
    check_error(run_json([command], 3, no_gpu_env), 3, "no_gpu", f"{command} without a GPU")
# A device the (simulated) driver does not have, given as --device=N and as --device N.
for args in (["doctor", "--device=7"], ["doctor", "--device", "7"]):
    missing_device = run_json(args, 3, simulated_env)
    check_error(missing_device, 3, "no_gpu", " ".join(args))
    check("no device 7" in missing_device.get("error", {}).get("message", ""), f"{' '.join(args)}: {missing_device}")

# bench: a stand-in suite executable (a script writing the JSON the bench harness writes) gives the table's rows and
# verdicts; a missing or failing suite is status 1.
fake_build = os.path.join(work, "fake-build")
os.makedirs(os.path.join(fake_build, "bench", "driver"))
with open(os.path.join(fake_build, "bench", "driver", "cuasync_driver_bench"), "w") as f:
    f.write('#!/bin/sh\ncat > "$1/driver.json" <<EOF\n{"bench": "driver", "results": [\n'
            '{"name": "a", "unit": "us", "baseline": "raw", "cuasync": {"median": 1.0}, "raw": {"median": 1.0}, '
            '"ratio": 1.02, "target": "<= 1.05"},\n'
            '{"name": "b", "unit": "GB/s", "baseline": "raw", "cuasync": {"median": 2.0}, "raw": {"median": 4.0}, '
            '"ratio": 0.5, "target": ">= 0.9"},\n'
            '{"name": "c", "unit": "%", "baseline": "raw", "cuasync": {"median": 1.5}, "raw": {"median": 100}, '
            '"ratio": 0.015, "target": "<= 5 % of a core (absolute)"},\n'
            '{"name": "d", "unit": "us", "baseline": "raw", "cuasync": {"median": 1}, "raw": {"median": 1}, '
            '"ratio": 1, "target": ""},\n'
            '{"name": "e", "unit": "x", "baseline": "raw", "cuasync": {"median": 1}, "raw": {"median": 1}, '
            '"ratio": 1.07, "target": "0.95 .. 1.05"}]}\nEOF\n')
os.chmod(os.path.join(fake_build, "bench", "driver", "cuasync_driver_bench"), 0o755)
bench = run_json(["bench", "--suite", "driver", "--build", fake_build, "--out", os.path.join(work, "bench-out")], 0,
                 simulated_env)
rows = {m["name"]: m["verdict"] for s in bench.get("suites", []) for m in s.get("measures", [])}
check(rows == {"a": "ok", "b": "MISSED", "c": "ok", "d": "-", "e": "MISSED"} and bench.get("missed_targets") == 2,
      f"bench --json: verdicts {rows}, {bench}")
out, _ = run(["bench", "--suite", "driver", "--build", fake_build, "--out", os.path.join(work, "bench-out")], 0,
             simulated_env)
check("MISSED" in out and "2 targets missed" in out, f"bench's table: {out}")
eq = run_json(["bench", "--suite=driver", f"--build={fake_build}", f"--out={os.path.join(work, 'bench-eq')}",
               "--timeout=60"], 0, simulated_env)
check(eq.get("results_directory") == os.path.join(work, "bench-eq") and eq.get("missed_targets") == 2,
      f"bench --opt=value: {eq}")
missing = run_json(["bench", "--suite", "jit", "--build", fake_build], 1, simulated_env)
check(missing.get("suites", [{}])[0].get("status") == "not found", f"bench of a suite not built: {missing}")
check_error(missing, 1, "suite_failed", "bench of a suite not built")  # the documented error object, with the rows

# compile: needs NVRTC, not a GPU. A cold compile, then a disk hit in a second process; a compile error is 1.
kernel = os.path.join(work, "scale.cu")
with open(kernel, "w") as f:
    f.write('template <class T> __global__ void scale(T* x, T a, int n) {\n'
            '  int i = blockIdx.x * blockDim.x + threadIdx.x;\n  if (i < n) x[i] *= a;\n}\n')
args = ["compile", kernel, "--arch", "sm_90", "--name-expression", "scale<float>"]
# A raw NVRTC option that would override the target is a usage error naming it, NVRTC or not.
refused = run_json(["compile", kernel, "-X", "-arch=sm_80"], 2, no_gpu_env)
check_error(refused, 2, "usage", "compile -X -arch=sm_80")
check("'-arch=sm_80'" in refused.get("error", {}).get("message", ""), f"compile -X -arch=sm_80: {refused}")
cold = run_json(args, 0, no_gpu_env)
if cold.get("error", {}).get("kind") == "nvrtc_error":
    print(f"check_cli: NVRTC did not load, compile checked for its error only: {cold['error']['message']}")
else:
    check(cold.get("cache", {}).get("outcome") == "miss", f"compile --json: first outcome {cold.get('cache')}")
    check(cold.get("target", {}).get("architecture") == "sm_90" and cold["target"].get("kind") == "cubin",
          f"compile --json: target {cold.get('target')}")
    check("scale<float>" in cold.get("lowered_names", {}), f"compile --json: lowered names {cold.get('lowered_names')}")
    check(cold.get("image_bytes", 0) > 0, "compile --json: empty image")
    # --opt=value, -DNAME=VALUE and -IDIR: the values reach the compile (the image is written where --output says).
    written = os.path.join(work, "scale.cubin")
    # Given twice, the last value counts (--arch=sm_80, then sm_90). The source compiles only with -DSCALE=2 and the
    # header found through -IDIR (not FILE's directory).
    include_dir = os.path.join(work, "include")
    os.makedirs(include_dir)
    with open(os.path.join(include_dir, "scale_factor.h"), "w") as f:
        f.write("#if SCALE != 2\n#error SCALE is not 2\n#endif\nconstexpr int scale_factor = SCALE;\n")
    needs_options = os.path.join(work, "needs_options.cu")
    with open(needs_options, "w") as f:
        f.write('#include "scale_factor.h"\n'
                'template <class T> __global__ void scale(T* x, int n) { if (threadIdx.x < n) x[threadIdx.x] *= '
                'scale_factor; }\n')
    eq = run_json(["compile", needs_options, "--arch=sm_80", "--arch=sm_90", "--name-expression=scale<float>",
                   f"--output={written}", "--max-registers=32", "--std=c++17", "-DSCALE=2", f"-I{include_dir}",
                   "--no-cache"], 0, no_gpu_env)
    check_error(run_json(["compile", needs_options, "--arch=sm_90", f"-I{include_dir}"], 1, no_gpu_env), 1,
                "compile_error", "compile without the -D the source needs")
    check(eq.get("target", {}).get("architecture") == "sm_90" and "scale<float>" in eq.get("lowered_names", {}) and
          eq.get("written") == written and os.path.getsize(written) == eq.get("image_bytes") and
          eq.get("cache") is None,
          f"compile --opt=value: {eq}")
    # An architecture NVRTC does not support is a usage error naming the supported ones, as --arch X or --arch=X.
    for arch_args in (["--arch", "sm_999"], ["--arch=sm_999"], ["--arch=compute_999"], ["--arch", "61"]):
        bad = run_json(["compile", kernel] + arch_args, 2, no_gpu_env)
        check_error(bad, 2, "usage", f"compile {' '.join(arch_args)}")
        message = bad.get("error", {}).get("message", "")
        check("sm_90" in message and "supports" in message, f"compile {' '.join(arch_args)}: {message}")
    out, err = run(["compile", kernel, "--arch", "sm_999"], 2, no_gpu_env)
    check("sm_90" in err and out == "", f"compile --arch sm_999 printed a report or no list: {out} {err}")
    hit = run_json(args, 0, no_gpu_env)
    check(hit.get("cache", {}).get("outcome") == "disk_hit", f"compile --json: second outcome {hit.get('cache')}")
    run(args, 0, no_gpu_env)
    # Each of those processes added its hits and misses to the cache's counts file: info shows the hit rates.
    counts = run_json(["info"], 3, no_gpu_env).get("jit_cache", {}).get("counts", {})
    check(counts.get("processes", 0) >= 3 and counts.get("disk_hits", 0) >= 2 and counts.get("compiles", 0) >= 1 and
          0 < counts.get("disk_hit_rate", 0) < 1, f"info --json: jit_cache counts {counts}")
    out, _ = run(["info"], 3, no_gpu_env)
    check(re.search(r"hit rates +memory \d+ hits? / \d+ miss(es)? \(", out), f"info shows no hit rates: {out}")
    # The compile that missed indexed its entry: info counts the records a warm start would load.
    index_records = run_json(["info"], 3, no_gpu_env).get("jit_cache", {}).get("index_records", 0)
    check(index_records >= 1, f"info --json: jit_cache index_records {index_records}")
    check(re.search(r"warm-start index +[1-9]\d* records? ", out), f"info shows no warm-start index: {out}")
    broken = os.path.join(work, "broken.cu")
    with open(broken, "w") as f:
        f.write("__global__ void k() { this is not C++; }\n")
    error = run_json(["compile", broken, "--arch", "sm_90"], 1, no_gpu_env)
    check_error(error, 1, "compile_error", "a compile error")
    check(error.get("error", {}).get("log"), "a compile error without NVRTC's log")
check_error(run_json(["compile", os.path.join(work, "missing.cu")], 1), 1, "io_error", "compile of a missing file")
# A library error names the cause and the fix, not cuasync's own source line; CUASYNC_DEBUG=1 adds the line.
no_nvrtc = dict(env, CUASYNC_LIBNVRTC=os.path.join(work, "no-such-libnvrtc.so"))
failed = run_json(["compile", kernel], 1, no_nvrtc)
check_error(failed, 1, "nvrtc_error", "compile without NVRTC")
message = failed.get("error", {}).get("message", "")
check("CUASYNC_LIBNVRTC" in message and ".cpp:" not in message, f"compile without NVRTC: {message}")
_, err = run(["compile", kernel], 1, no_nvrtc)
check(err.startswith("cuasync compile: ") and ".cpp:" not in err, f"compile without NVRTC: {err}")
_, err = run(["compile", kernel], 1, dict(no_nvrtc, CUASYNC_DEBUG="1"))
check(".cpp:" in err, f"compile without NVRTC, CUASYNC_DEBUG=1, has no source line: {err}")

# trace: the committed trace renders and summarizes; unreadable and malformed traces are 1.
page = os.path.join(work, "timeline.html")
out, _ = run(["trace", recorded_trace, "-o", page], 0, no_gpu_env)
check("critical stage: compute" in out and os.path.getsize(page) > 1000, "trace: no summary or no page")
summary = run_json(["trace", recorded_trace, "-o", page], 0, no_gpu_env)
check(summary.get("spans") == 31 and summary.get("lanes") == 7 and summary.get("html") == page,
      f"trace --json: {summary}")
check(summary.get("summary", {}).get("critical") == "compute", "trace --json: critical stage")
check("diagnostics: no findings" in out and summary.get("diagnostics") == [],
      f"trace: the clean pipeline has findings: {summary.get('diagnostics')}")
# A trace that provokes a diagnostic: a pageable copy between two launches, then a device-wide synchronize.
provoking = os.path.join(work, "provoking.json")
with open(provoking, "w") as f:
    json.dump({"traceEvents": [
        {"ph": "X", "name": "k", "cat": "launch", "pid": 1, "tid": 1, "ts": 0, "dur": 2,
         "args": {"lane": "thread", "device": -1, "id": 1, "stream": 5}},
        {"ph": "X", "name": "cuMemcpyHtoDAsync", "cat": "copy", "pid": 2, "tid": 1, "ts": 3, "dur": 40,
         "args": {"lane": "h2d", "device": 0, "id": 0, "stream": 5, "bytes": 4096, "flags": ["pageable_host"]}},
        {"ph": "X", "name": "cuCtxSynchronize", "cat": "sync", "pid": 1, "tid": 1, "ts": 3, "dur": 50,
         "args": {"lane": "thread", "device": -1, "id": 1, "flags": ["device_wide"]}},
        {"ph": "X", "name": "k", "cat": "launch", "pid": 1, "tid": 1, "ts": 60, "dur": 2,
         "args": {"lane": "thread", "device": -1, "id": 1, "stream": 5}}]}, f)
out, _ = run(["trace", provoking, "--no-html"], 0)
check("[pageable_copy] 1 asynchronous copy" in out and "[device_synchronize]" in out and "fix: " in out,
      f"trace: the provoking trace's findings are not printed: {out}")
found = run_json(["trace", provoking, "--no-html"], 0).get("diagnostics", [])
check([d.get("id") for d in found] == ["pageable_copy", "device_synchronize"] and
      all(d.get("summary") and d.get("explanation") and d.get("fix") and d.get("examples") for d in found) and
      found[0].get("occurrences") == 1, f"trace --json: diagnostics of the provoking trace: {found}")
eq_page = os.path.join(work, "eq.html")
eq = run_json(["trace", recorded_trace, f"--output={eq_page}", "--device=1"], 0)
check(eq.get("html") == eq_page and eq.get("device") == 1 and os.path.getsize(eq_page) > 1000,
      f"trace --opt=value: {eq}")
only = run_json(["trace", recorded_trace, "--no-html", "--device", "1"], 0)
check(only.get("html") is None and only.get("summary", {}).get("critical") == "none" and
      only.get("device_in_trace") is False, f"trace --device 1: {only}")
out, _ = run(["trace", recorded_trace, "--no-html", "--device", "1"], 0)
check("GPU 1 has no lane in this trace" in out, f"trace --device 1 does not say the GPU is absent: {out}")
# The page is HTML whatever its name; never written over the input; a directory is no trace.
odd = os.path.join(work, "page.htm")
run(["trace", recorded_trace, "-o", odd], 0)
with open(odd, "rb") as f:
    check(f.read(15) == b"<!DOCTYPE html>", "trace -o page.htm did not write HTML")
copy_of_input = os.path.join(work, "input_copy.json")
with open(recorded_trace, "rb") as src, open(copy_of_input, "wb") as dst:
    dst.write(src.read())
check_error(run_json(["trace", copy_of_input, "-o", copy_of_input], 2), 2, "usage", "trace -o INPUT")
with open(copy_of_input, "rb") as a, open(recorded_trace, "rb") as b:
    check(a.read() == b.read(), "trace -o INPUT changed the input")
os.makedirs(os.path.join(work, "dir.json"), exist_ok=True)
check_error(run_json(["trace", os.path.join(work, "dir.json")], 2), 2, "usage", "trace of a directory")
# Names from other tools: control characters are shown escaped, bytes that are not UTF-8 become U+FFFD.
hostile = os.path.join(work, "hostile.json")
with open(hostile, "wb") as f:
    f.write(b'{"traceEvents": [{"ph": "X", "name": "\\u001b[2Jcopy \xff\xfe", "cat": "copy", "pid": 2, "tid": 1,'
            b' "ts": 3, "dur": 40, "args": {"lane": "h2d", "device": 0, "id": 0, "stream": 5, "bytes": 4096,'
            b' "flags": ["pageable_host"]}}]}')
raw = subprocess.run([tool, "trace", hostile, "--no-html"], capture_output=True, timeout=60).stdout
check(b"\x1b" not in raw and b"\\x1b[2J" in raw, f"trace printed a raw escape sequence: {raw!r}")
as_json = subprocess.run([tool, "trace", hostile, "--no-html", "--json"], capture_output=True, timeout=60).stdout
check(json.loads(as_json.decode("utf-8")).get("spans") == 1, "trace --json of a name that is not UTF-8")
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
