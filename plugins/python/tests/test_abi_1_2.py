# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""ABI 1.2 from Python, without a GPU: the library's version, compiling to bytes, errors for the caller, the log."""
import logging
import os
import re
import subprocess
import sys

import pytest

import cuasync
from cuasync import _capi, errors

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)

SOURCE = r'''
template <class T> __global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
extern "C" __global__ void fill(float* x, float v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }
'''


def run_python(code, **env):
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PACKAGE_ROOT, **env),
                         capture_output=True, text=True, timeout=120)
    return out.stdout, out.stderr


def test_version_is_the_librarys():
    assert re.fullmatch(r"\d+\.\d+\.\d+", cuasync.__version__)
    v = _capi.call("library_version", _capi.LibraryVersionArgs())
    assert cuasync.__version__ == v.version.decode() == f"{v.major}.{v.minor}.{v.patch}"
    assert cuasync.__version__ == cuasync._PACKAGE_VERSION, "the package and the library it ships with agree"


def test_compile_to_bytes_needs_no_gpu():
    # No driver at all: compile_to_bytes uses NVRTC only.
    code = ("import cuasync\n"
            "img = cuasync.compile_to_bytes(SRC, arch='sm_90', name_expressions=['scale<float>'])\n"
            "print(img.kind, img.architecture, img.data[:4] == b'\\x7fELF', img.lowered_names['scale<float>'])\n")
    out, err = run_python(f"SRC = {SOURCE!r}\n" + code, CUASYNC_LIBCUDA="/nonexistent/libcuda.so.1")
    kind, arch, elf, lowered = out.split()
    assert (kind, arch, elf) == ("cubin", "sm_90", "True"), out + err
    assert lowered.startswith("_Z") and "scale" in lowered


def test_compile_to_bytes_ptx_and_options():
    img = cuasync.compile_to_bytes(SOURCE, arch="compute_90", options=["-DUNUSED=1"],
                                   name_expressions=["scale<float>", "scale<double>"])
    assert isinstance(img, cuasync.CompiledImage)
    assert img.kind == "ptx" and img.architecture == "compute_90"
    text = img.data.decode()
    assert ".version" in text and ".entry fill" in text and not text.endswith("\0")
    assert set(img.lowered_names) == {"scale<float>", "scale<double>"}
    assert all(name in text for name in img.lowered_names.values())
    with_header = cuasync.compile_to_bytes('#include "n.h"\n__global__ void k(int* x) { *x = N; }', arch="90",
                                           headers={"n.h": "#define N 7\n"})
    assert with_header.kind == "cubin" and with_header.architecture == "sm_90"


def test_compile_to_bytes_refuses_an_unknown_architecture():
    with pytest.raises(errors.UnsupportedError) as e:
        cuasync.compile_to_bytes(SOURCE, arch="sm_999")
    assert "sm_999" in e.value.message and "sm_90" in e.value.message  # the supported ones named
    with pytest.raises(errors.InvalidArgumentError, match="sm_nine"):
        cuasync.compile_to_bytes(SOURCE, arch="sm_nine")
    with pytest.raises(TypeError):
        cuasync.compile_to_bytes(SOURCE, arch=90)


def test_compile_errors_quote_the_source_and_not_cuasync():
    with pytest.raises(errors.CompileError) as e:
        cuasync.compile_to_bytes("__global__ void k() { undefined_name = 1; }", arch="sm_90", name="broken.cu")
    assert "compile_image" in e.value.message and "undefined_name" in e.value.message
    assert e.value.nvrtc_result != 0
    assert ".cpp:" not in e.value.message


def test_no_driver_error_names_the_call_and_the_fix_not_cuasync_internals():
    code = ("import cuasync\ntry:\n    cuasync.Runtime(0)\nexcept cuasync.NoDriverError as e:\n"
            "    print(str(e))\n")
    out, err = run_python(code, CUASYNC_LIBCUDA="/nonexistent/libcuda.so.1")
    assert out.startswith("runtime_create: ") and "CUASYNC_LIBCUDA" in out, out + err
    assert ".cpp:" not in out and "cuasync::" not in out, out
    out, err = run_python(code, CUASYNC_LIBCUDA="/nonexistent/libcuda.so.1", CUASYNC_DEBUG="1")
    assert out.startswith("runtime_create: ") and ".cpp:" in out, out + err


def test_cuasync_log_reaches_logging():
    # CUASYNC_LOG=info with no handler configured: the package adds one to stderr, so the lines show as they would
    # without Python.
    code = f"import cuasync\ncuasync.compile_to_bytes({SOURCE!r}, arch='compute_90')\n"
    out, err = run_python(code, CUASYNC_LOG="info", CUASYNC_CACHE="off")
    assert "cuasync: INFO: NVRTC" in err and "loaded from" in err, err
    assert "cuasync: INFO: JIT cache miss" in err, err


def test_set_log_level_forwards_to_the_cuasync_logger(caplog):
    caplog.set_level(logging.DEBUG, logger="cuasync")
    try:
        cuasync.set_log_level("debug")
        cuasync.compile_to_bytes(SOURCE, arch="compute_90")
        cuasync.compile_to_bytes(SOURCE, arch="compute_90")  # the second from memory: a debug line
        records = [r for r in caplog.records if r.name == "cuasync"]
        assert any("JIT memory cache hit" in r.getMessage() and r.levelno == logging.DEBUG for r in records), records
        cuasync.set_log_level("off")
        n = len(caplog.records)
        cuasync.compile_to_bytes(SOURCE, arch="compute_90")
        assert len(caplog.records) == n
        with pytest.raises(errors.InvalidArgumentError):
            cuasync.set_log_level("loud")
    finally:
        cuasync.set_log_level(None)


def test_log_from_a_thread_of_cuasync_or_another_python_thread():
    # The sink runs on whatever thread logs: here several Python threads compiling at once (each a ctypes call that
    # released the GIL, its callback taking it back); none may deadlock.
    import threading
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    log = logging.getLogger("cuasync")
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.DEBUG)
    try:
        cuasync.set_log_level("debug")
        threads = [threading.Thread(target=cuasync.compile_to_bytes, args=(SOURCE + f"// {i}\n",),
                                    kwargs={"arch": "compute_90"}) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
        assert sum("JIT" in m for m in seen) >= 4, seen
    finally:
        cuasync.set_log_level(None)
        log.removeHandler(handler)
        log.setLevel(old_level)


def test_admission_limits_need_a_runtime():
    with pytest.raises(errors.StaleHandleError):
        _capi.call("runtime_admission_get", _capi.AdmissionLimitsArgs(runtime=0x7a7a7a01))
