# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Compiling without a GPU: NVRTC for a named architecture, the image returned as bytes (ABI 1.2's compile_image)."""
from __future__ import annotations

import concurrent.futures
import ctypes
import os
import threading
from typing import Dict, Iterable, NamedTuple, Optional

from . import _capi
from ._jit import _header_array, _strings


class CompiledImage(NamedTuple):
    """What `compile_to_bytes` returns."""

    data: bytes
    """The image: a CUBIN (an ELF file) for `kind == "cubin"`, PTX text (no trailing NUL) for `kind == "ptx"`."""
    kind: str
    """"cubin" or "ptx"."""
    architecture: str
    """What it was compiled for: "sm_90" (CUBIN) or "compute_90" (PTX)."""
    lowered_names: Dict[str, str]
    """Each name expression given, mapped to its lowered (mangled) name, for cuModuleGetFunction."""
    log: str
    """NVRTC's log (warnings); empty when there were none."""


def _image_args(source, arch, expressions, options, headers, name):
    """compile_image's arguments, and what they point into (keep it alive while the call reads them)."""
    if not isinstance(arch, str):
        raise TypeError(f"compile_to_bytes: arch must be a str such as 'sm_90', not {type(arch).__name__}")
    exprs, n_exprs = _strings(expressions)
    opts, n_opts = _strings(options)
    hdrs, n_hdrs = _header_array(headers)
    keep = (arch.encode(), name.encode(), source.encode(), exprs, opts, hdrs)
    a = _capi.CompileImageArgs(arch=keep[0], name=keep[1], source=keep[2], options=opts, num_options=n_opts,
                               headers=hdrs, num_headers=n_hdrs, name_expressions=exprs, num_name_expressions=n_exprs)
    a.struct_size = ctypes.sizeof(a)
    return a, keep


def _image_of(a, expressions):
    """The CompiledImage of compile_image's out fields in `a`; the library's image is destroyed."""
    try:
        lowered = {e: a.lowered_names[i].decode() for i, e in enumerate(expressions)}
        return CompiledImage(data=ctypes.string_at(a.data, a.size),
                             kind="ptx" if a.kind == _capi.IMAGE_PTX else "cubin",
                             architecture=a.architecture.decode(), lowered_names=lowered,
                             log=(a.log or b"").decode("utf-8", "replace"))
    finally:
        _capi.call("image_destroy", _capi.ImageDestroyArgs(image=a.image))


def compile_to_bytes(source: str, arch: str, name_expressions: Iterable[str] = (), options: Iterable[str] = (),
                     headers: Optional[Dict[str, str]] = None, name: str = "kernel.cu") -> CompiledImage:
    """Compiles CUDA C++ `source` with NVRTC for the architecture `arch` and returns the image as bytes. Needs no GPU
    and no driver, only NVRTC (a build step, a machine that ships images to others, a cache warmed ahead of time).

    `arch`: "sm_90" for a CUBIN, "compute_90" for PTX (which the driver compiles at load, on that architecture and
    newer), or "90" (as "sm_90"). One NVRTC does not support raises UnsupportedError naming those it does.
    `name_expressions` ("scale<float>"): their lowered names come back in `lowered_names`. `options`: NVRTC options
    ("-DN=4", "--use_fast_math"), not one that sets the target. `headers` maps include names to contents.
    Goes through cuasync's memory and disk caches, as `compile` does. Blocks while NVRTC runs. Raises CompileError
    (with NVRTC's log and the offending line) for a compile error or a missing NVRTC."""
    expressions = [str(e) for e in name_expressions]
    a, keep = _image_args(source, arch, expressions, options, headers, name)
    _capi.call("compile_image", a)
    del keep
    return _image_of(a, expressions)


class _CompileWaiter:
    """One Python thread for every compile in flight through the C ABI's compile jobs (ABI 1.5): it sleeps on a
    queue's fd and finishes each job as its completion arrives, while the compiles run in cuasync's compile threads or
    the farm's worker processes. Python runs only here and on the callers' threads, never on a cuasync thread."""

    def __init__(self):
        from . import _queues
        self._queue = _queues._Queue()
        self._wait_fd = _queues.wait_fd
        self._lock = threading.Lock()  # start and drain: a job's handle is known before its completion is handled
        threading.Thread(target=self._run, name="cuasync-compile-wait", daemon=True).start()

    def _run(self):
        while not _capi.exiting:
            self._wait_fd(self._queue.fd, 1.0)
            with self._lock:
                self._queue.drain()

    def start(self, source, arch, expressions, options, headers, name):
        future = concurrent.futures.Future()
        job = []

        def finished(code, cuda_result):
            result = _capi.CompileImageArgs()
            result.struct_size = ctypes.sizeof(result)
            try:
                _capi.call("compile_image_finish",
                           _capi.CompileImageFinishArgs(job=job[0], result=ctypes.pointer(result)))
                future.set_result(_image_of(result, expressions))
            except BaseException as e:  # the compile's own error (CompileError, ...), as compile_to_bytes raises it
                future.set_exception(e)

        try:
            a, keep = _image_args(source, arch, expressions, options, headers, name)
            with self._lock:
                completion = self._queue.completion(finished)
                try:
                    job.append(_capi.call("compile_image_start", _capi.CompileImageStartArgs(
                        compile=ctypes.pointer(a), completion=completion)).job)
                except BaseException:
                    self._queue.forget(completion)
                    raise
            del keep
        except BaseException as e:  # a bad argument: the future's exception, as a failed compile's
            future.set_exception(e)
        return future


_waiter: Optional[_CompileWaiter] = None
_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def compile_to_bytes_async(source: str, arch: str, name_expressions: Iterable[str] = (), options: Iterable[str] = (),
                           headers: Optional[Dict[str, str]] = None,
                           name: str = "kernel.cu") -> "concurrent.futures.Future[CompiledImage]":
    """`compile_to_bytes` without blocking: a `concurrent.futures.Future` (in asyncio: `await asyncio.wrap_future(f)`).
    The compiles in flight run at once: in the compile farm's worker processes when `CUASYNC_JIT_FARM` is set (`auto`:
    as many as the hardware threads, at most 16; set it before the package loads the library), else on cuasync's
    compile threads (as many as the hardware threads, at most 16), where NVRTC stops scaling at ~2.6x one thread. No
    thread waits per compile: one package thread finishes them all as their completions arrive (a library older than
    ABI 1.5: a thread of a pool per compile in flight). A bad argument or a failed compile is the future's exception
    (CompileError, UnsupportedError, ...)."""
    global _waiter, _pool
    expressions, opts = [str(e) for e in name_expressions], list(options)  # the caller's iterables, read now
    with _pool_lock:
        if _capi.abi_version() >= (1, 5):
            if _waiter is None:
                _waiter = _CompileWaiter()
            waiter = _waiter
        else:
            waiter = None
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1),
                                                              thread_name_prefix="cuasync-compile")
            pool = _pool
    if waiter is not None:
        return waiter.start(source, arch, expressions, opts, headers, name)
    return pool.submit(compile_to_bytes, source, arch, expressions, opts, headers, name)
