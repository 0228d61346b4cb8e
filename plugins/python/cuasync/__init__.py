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

libcuasync.so is found through $CUASYNC_LIBRARY, next to this package, or in the repository's build folder.
PyTorch, CuPy and JAX are optional: `cuasync.torch` and `cuasync.jax` import them when used.
"""
import atexit

from . import _capi, _queues
from ._capi import abi_version, library_path
from ._completion import HostToken, Pending, collect, host_token
from ._jit import Kernel, Module, compile, grid_for, load_package
from ._memory import Buffer, copy, empty, from_dlpack, memset, zeros
from ._runtime import Event, Runtime, Stream, device_count
from .errors import (BusyError, CancelledError, CompileError, CuasyncError, CudaError, InternalError,
                     InvalidArgumentError, LibraryNotFoundError, NoDriverError, OutOfMemoryError, StaleHandleError,
                     UnsupportedError)

__all__ = ["Buffer", "BusyError", "CancelledError", "CompileError", "CuasyncError", "CudaError", "Event", "HostToken",
           "InternalError", "InvalidArgumentError", "Kernel", "LibraryNotFoundError", "Module", "NoDriverError",
           "OutOfMemoryError", "Pending", "Runtime", "StaleHandleError", "Stream", "UnsupportedError", "abi_version",
           "collect", "compile", "copy", "device_count", "empty", "from_dlpack", "grid_for", "host_token",
           "library_path", "load_package", "memset", "zeros"]


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
