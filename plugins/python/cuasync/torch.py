# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch: cuasync kernels as `torch.library` custom ops on PyTorch's current stream.

- `current_stream(device)`: PyTorch's current stream as a cuasync Stream (adopted once per torch stream; PyTorch's
  default stream is the legacy default stream of the device's primary context, which cuasync shares).
- `launch(kernel, grid, block, *args)`: an untracked, checked launch on that stream: PyTorch orders its streams
  itself, so cuasync adds no event and no admission place, which also makes it safe inside `torch.cuda.graph`
  capture. Compile and load the kernel before a capture (`scale_add.warm_up()` for the op below).
- `cuasync::scale_add(x, y, alpha) -> alpha * x + y`: a custom op backed by a cuasync JIT kernel, with a fake (meta)
  implementation and autograd, so it passes `torch.library.opcheck`, runs under `torch.compile(fullgraph=True)` and
  in CUDA graphs. It is also the template for ops of your own. Two implementations, one schema: the C++ ops
  (plugins/torch/cuasync_torch_ops.cpp: PyTorch's dispatcher calls C++ directly, near `torch.add`'s cost), built
  against the running torch and cached, and the `torch.library.custom_op` fallback (Python dispatch per call).
  `CUASYNC_TORCH_OPS` picks at import (auto: the C++ ops when already built for this torch; native; python);
  `build_ops()` or `python -m cuasync.torch build` builds them; `implementation()` says which is in use.
"""
import sys
import threading

import torch

from . import _jit, _log, _runtime, _torch_ops

_streams = {}  # (device, CUstream) -> cuasync Stream: PyTorch's streams come from pools it never destroys
_streams_lock = threading.Lock()


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # the CUstream as an int, without a Stream object


def current_stream(device=None):
    """PyTorch's current stream on `device` (an index; default: the current device) as a cuasync Stream."""
    if device is None:
        device = torch.cuda.current_device()
    elif not isinstance(device, int):
        device = torch.device(device).index or 0
    raw = _raw_stream(device) if _raw_stream is not None else torch.cuda.current_stream(device).cuda_stream
    s = _streams.get((device, raw))
    if s is None:
        with _streams_lock:
            s = _streams.get((device, raw))
            if s is None:
                s = _streams[(device, raw)] = _runtime.Stream.adopt(raw, _runtime.Runtime.for_device(device))
    return s


def launch(kernel, grid, block, *args, shared_memory=0, device=None):
    """Launches a cuasync kernel on PyTorch's current stream (untracked: PyTorch orders it like its own kernels)."""
    kernel.launch_untracked(current_stream(device), grid, block, *args, shared_memory=shared_memory)


class KernelPerDevice:
    """One program compiled (through cuasync's caches) and loaded for each device that uses it."""

    def __init__(self, source, name, options=(), program_name="cuasync_torch.cu"):
        self.source, self.name, self.options, self.program_name = source, name, tuple(options), program_name
        self._kernels = {}
        self._lock = threading.Lock()

    def __call__(self, device_index):
        k = self._kernels.get(device_index)
        if k is None:
            with self._lock:
                k = self._kernels.get(device_index)
                if k is None:
                    m = _jit.compile(self.source, self.program_name, self.options,
                                     runtime=_runtime.Runtime.for_device(device_index))
                    k = self._kernels[device_index] = m.kernel(self.name)
        return k

    def warm_up(self, device_index=None):
        """Compiles and loads for a device now (before a CUDA graph capture, which must not compile)."""
        self(torch.cuda.current_device() if device_index is None else device_index)


_SCALE_ADD = KernelPerDevice(r"""
extern "C" __global__ void scale_add_f32(const float* x, const float* y, float* out, float alpha, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i] + y[i];
}
""", "scale_add_f32", options=("--fmad=false",))  # each operation rounded, as PyTorch's eager alpha * x + y


def _check(x, y):
    if x.shape != y.shape:
        raise ValueError(f"cuasync::scale_add: shapes {tuple(x.shape)} and {tuple(y.shape)}")
    if x.dtype != torch.float32 or y.dtype != torch.float32:
        raise TypeError(f"cuasync::scale_add: float32 tensors only, got {x.dtype} and {y.dtype}")
    if x.device != y.device:
        raise ValueError(f"cuasync::scale_add: devices {x.device} and {y.device}")


def _scale_add_python(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * x + y, computed by a cuasync JIT kernel on PyTorch's current stream."""
    _check(x, y)
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    if n:
        device = x.device.index
        _SCALE_ADD(device).launch_untracked(current_stream(device), _jit.grid_for(n, 256), 256, x, y, out,
                                            float(alpha), n)
    return out


def _scale_add_fake(x, y, alpha):
    _check(x, y)
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output):
    ctx.alpha = inputs[2]


def _backward(ctx, grad):
    return grad * ctx.alpha, grad, None


def _load_native():
    """The C++ ops, as CUASYNC_TORCH_OPS asks (None: the Python op is to be defined)."""
    m = _torch_ops.mode()
    if m == "python":
        return None
    path = _torch_ops.build(torch) if m == "native" else _torch_ops.cached(torch)
    if path is None:
        return None
    try:
        return _torch_ops.NativeOps(torch, path)
    except _torch_ops.BuildError as e:
        if m == "native":
            raise
        _log.logger.warning("cuasync.torch: the cached C++ ops did not load (%s); using the Python custom op", e)
        return None


_native = _load_native()
if _native is None:
    scale_add = torch.library.custom_op("cuasync::scale_add", mutates_args=(), device_types="cuda")(_scale_add_python)
    scale_add.register_fake(_scale_add_fake)
    scale_add.register_autograd(_backward, setup_context=_setup_context)
else:
    scale_add = torch.ops.cuasync.scale_add  # the C++ op and its C++ autograd: Python only for tracing (fake)
    torch.library.register_fake("cuasync::scale_add")(_scale_add_fake)


def implementation():
    """"native" (the C++ ops) or "python" (the custom op): which one `torch.ops.cuasync.scale_add` runs."""
    return "python" if _native is None else "native"


def warm_up(device_index=None):
    """Compiles and loads the op's kernel for a device now (before a CUDA graph capture, which must not compile)."""
    device = torch.cuda.current_device() if device_index is None else device_index
    if _native is None:
        _SCALE_ADD.warm_up(device)
    else:
        _native.warm_up(device)


scale_add.warm_up = warm_up


def build_ops(cache_dir=None):
    """Builds the C++ ops for the running torch into the cache (once; ~1 min) and returns the library's path. The
    next process that imports cuasync.torch uses them (this one keeps the implementation it started with)."""
    return _torch_ops.build(torch, cache_dir)


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        raise SystemExit("usage: python -m cuasync.torch build")
    print(build_ops())
