# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""cuasync for Python: CUDA streams, NVRTC kernels, copies and DLPack exchanges over cuasync's C ABI (ctypes, the
standard library only), with GPU completions awaitable from asyncio (the default loop and uvloop) through an eventfd
watched by the loop, so no Python ever runs on a driver or cuasync thread.

    import asyncio, cuasync
    mod = cuasync.compile(r'''extern "C" __global__ void inc(float* x, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += 1; }''')
    async def main():
        s = cuasync.Stream()
        x = cuasync.zeros(1024, "float32", stream=s)
        await mod.inc.launch(s, cuasync.grid_for(1024), 256, x, 1024)
    asyncio.run(main())

libcuasync.so.1 is found through $CUASYNC_LIBRARY, next to this package (the wheel puts it there), where
`cmake --install` put it, or in the repository's build folder. NVRTC from pip's nvidia-cuda-nvrtc wheel
(site-packages/nvidia/*/lib) is found too, after the system's (see _nvrtc_search).
`cuasync.compile_to_bytes(source, arch="sm_90")` compiles without a GPU; `compile_to_bytes_async` returns a
`concurrent.futures.Future`, and with CUASYNC_JIT_FARM=auto the compiles run in worker processes. `cuasync.__version__` is the loaded
library's version; CUASYNC_LOG=info (or debug) forwards cuasync's log to the `logging` logger "cuasync".
PyTorch, CuPy and JAX are optional: `cuasync.torch` and `cuasync.jax` import them when used.
"""
import atexit

from . import _capi, _log, _queues
from ._capi import abi_version, library_path
from . import _version
from ._completion import HostToken, Pending, collect, host_token
from ._flight import disable_flight_recorder, enable_flight_recorder, flight_recorder_dump
from ._image import CompiledImage, compile_to_bytes, compile_to_bytes_async
from ._jit import Kernel, Module, compile, grid_for, load_package
from ._log import set_log_level
from ._memory import Buffer, copy, empty, from_dlpack, memset, zeros
from ._replay import ReplayAnchor, ReplayWait
from ._runtime import Event, Runtime, Stream, device_count
from .errors import (BusyError, CancelledError, CompileError, CuasyncError, CudaError, InternalError,
                     InvalidArgumentError, LibraryNotFoundError, NoDriverError, OutOfMemoryError, StaleHandleError,
                     UnsupportedError)

__all__ = ["Buffer", "BusyError", "CancelledError", "CompileError", "CompiledImage", "CuasyncError", "CudaError",
           "Event", "HostToken", "InternalError", "InvalidArgumentError", "Kernel", "LibraryNotFoundError", "Module",
           "NoDriverError", "OutOfMemoryError", "Pending", "ReplayAnchor", "ReplayWait", "Runtime", "StaleHandleError",
           "Stream", "UnsupportedError",
           "abi_version", "collect", "compile", "compile_to_bytes", "compile_to_bytes_async", "copy", "device_count", "disable_flight_recorder",
           "empty", "enable_flight_recorder", "flight_recorder_dump", "from_dlpack",
           "grid_for", "host_token", "library_path", "load_package", "memset", "set_log_level", "zeros"]

# The version this Python package was released as: what __version__ says only when the library cannot say its own.
_PACKAGE_VERSION = _version.__version__


def __getattr__(name):
    # __version__ is the loaded libcuasync.so's own version (ABI 1.2's library_version), read when first asked for:
    # importing the package loads no library.
    if name == "__version__":
        import warnings
        try:
            version = _capi.library_version()
            why = f"{_capi.library_path()} predates ABI 1.2 and cannot say its version"
        except CuasyncError as e:
            version, why = None, f"libcuasync.so could not be loaded ({e})"
        if version is None:
            warnings.warn(f"cuasync.__version__: {why}: it is the Python package's, {_PACKAGE_VERSION}",
                          RuntimeWarning, stacklevel=2)
            version = _PACKAGE_VERSION
        globals()["__version__"] = version
        return version
    raise AttributeError(f"module 'cuasync' has no attribute {name!r}")


_log.install_at_import()


@atexit.register
def _exiting():
    # Objects collected after this point leave their handles to the process's end: the driver takes everything then,
    # and a call during the interpreter's teardown could meet half-destroyed modules.
    try:
        # GPU work nobody awaited (copies not waited for) may still be copied into host memory by cuasync's threads:
        # let it finish (10 s at most) before the interpreter frees that memory.
        _queues.wait_for_gpu_work_at_exit()
        collect()
    finally:
        _capi.exiting = True
