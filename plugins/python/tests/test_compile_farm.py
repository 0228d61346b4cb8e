# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The compile farm from Python: its worker beside the library in use, CUASYNC_JIT_FARM sending the library's compiles
to worker processes, and compile_to_bytes_async's futures. No GPU needed."""
import os
import subprocess
import sys

import cuasync

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cuasync.__file__)))  # the package under test

SOURCE = 'template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }\n'


def run_python(code, **env):
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PACKAGE_ROOT, **env),
                         capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_the_worker_is_beside_the_library():
    # Where the library looks for it first (the wheel ships it in the package, cmake --install and the build put it
    # beside libcuasync.so).
    worker = os.path.join(os.path.dirname(os.path.realpath(cuasync.library_path())), "cuasync-jit-worker")
    assert os.path.isfile(worker) and os.access(worker, os.X_OK), worker


def test_futures_compile_in_the_farms_worker_processes():
    code = ("import cuasync\n"
            f"src = {SOURCE!r}\n"
            "fs = [cuasync.compile_to_bytes_async(src + '// %d' % i, 'sm_90', ['scale<%d>' % (i + 1)]) for i in range(6)]\n"
            "imgs = [f.result(timeout=100) for f in fs]\n"
            "print(all(i.data[:4] == b'\\x7fELF' for i in imgs), sorted(i.lowered_names.popitem()[0] for i in imgs))\n"
            "bad = cuasync.compile_to_bytes_async('not CUDA', 'sm_90')\n"
            "print(type(bad.exception(timeout=100)).__name__)\n")
    rc, out, err = run_python(code, CUASYNC_JIT_FARM="2", CUASYNC_CACHE="off", CUASYNC_LOG="info")
    assert rc == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("True ") and "'scale<6>'" in lines[0], out
    assert lines[1] == "CompileError", out
    assert err.count("JIT cache miss, compiled by the compile farm") == 6, err
    assert "compiling in this process instead" not in err, err


def test_futures_hold_no_thread_per_compile():
    # ABI 1.5's compile jobs: eight compiles in flight, one package thread finishing them all (the compiles run on
    # cuasync's compile threads, which are not Python threads); a bad architecture is the future's exception.
    code = ("import threading, cuasync\n"
            f"src = {SOURCE!r}\n"
            "before = threading.active_count()\n"
            "fs = [cuasync.compile_to_bytes_async(src + '// t%d' % i, 'compute_90', ['scale<%d>' % (i + 1)])\n"
            "      for i in range(8)]\n"
            "during = threading.active_count()\n"
            "imgs = [f.result(timeout=100) for f in fs]\n"
            "print(during - before, all(i.kind == 'ptx' and b'.entry' in i.data for i in imgs),\n"
            "      [list(i.lowered_names)[0] for i in imgs] == ['scale<%d>' % (i + 1) for i in range(8)])\n"
            "print(type(cuasync.compile_to_bytes_async(src, 'sm_999').exception(timeout=100)).__name__)\n"
            "print(type(cuasync.compile_to_bytes_async('not CUDA', 'sm_90').exception(timeout=100)).__name__)\n")
    rc, out, err = run_python(code, CUASYNC_CACHE="off")
    assert rc == 0, out + err
    lines = out.splitlines()
    assert lines[0] == "1 True True", out  # one waiter thread, however many compiles
    assert lines[1] == "UnsupportedError", out
    assert lines[2] == "CompileError", out
