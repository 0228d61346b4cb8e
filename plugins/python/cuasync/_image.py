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
    if not isinstance(arch, str):
        raise TypeError(f"compile_to_bytes: arch must be a str such as 'sm_90', not {type(arch).__name__}")
    expressions = [str(e) for e in name_expressions]
    exprs, n_exprs = _strings(expressions)
    opts, n_opts = _strings(options)
    hdrs, n_hdrs = _header_array(headers)
    a = _capi.call("compile_image", _capi.CompileImageArgs(
        arch=arch.encode(), name=name.encode(), source=source.encode(), options=opts, num_options=n_opts,
        headers=hdrs, num_headers=n_hdrs, name_expressions=exprs, num_name_expressions=n_exprs))
    try:
        lowered = {e: a.lowered_names[i].decode() for i, e in enumerate(expressions)}
        return CompiledImage(data=ctypes.string_at(a.data, a.size),
                             kind="ptx" if a.kind == _capi.IMAGE_PTX else "cubin",
                             architecture=a.architecture.decode(), lowered_names=lowered,
                             log=(a.log or b"").decode("utf-8", "replace"))
    finally:
        _capi.call("image_destroy", _capi.ImageDestroyArgs(image=a.image))


_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None
_pool_lock = threading.Lock()


def compile_to_bytes_async(source: str, arch: str, name_expressions: Iterable[str] = (), options: Iterable[str] = (),
                           headers: Optional[Dict[str, str]] = None,
                           name: str = "kernel.cu") -> "concurrent.futures.Future[CompiledImage]":
    """`compile_to_bytes` on a thread of the package's compile pool (as many threads as cores, at most 16), as a
    `concurrent.futures.Future` (in asyncio: `await asyncio.wrap_future(f)`). The library releases the GIL while it
    compiles, so the compiles in flight run at once: in the compile farm's worker processes when `CUASYNC_JIT_FARM` is
    set (`auto`: as many as the hardware threads, at most 16; set it before the package loads the library), else on
    these threads of this process, where NVRTC stops scaling at ~2.6x one thread. A bad argument or a failed compile
    is the future's exception (CompileError, UnsupportedError, ...)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(16, os.cpu_count() or 1),
                                                          thread_name_prefix="cuasync-compile")
        pool = _pool
    expressions, opts = list(name_expressions), list(options)  # the caller's iterables are read now, on its thread
    return pool.submit(compile_to_bytes, source, arch, expressions, opts, headers, name)
