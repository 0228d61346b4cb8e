# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""JAX: cuasync JIT kernels inside `jax.jit`, through XLA's published FFI and nothing else (no build-time dependency).

- `build_handler(cache_dir=None)`: compiles plugins/jax/cuasync_xla_ffi.cpp with the system C++ compiler against the
  running jaxlib's FFI headers (`jax.ffi.include_dir()`) and cuasync.h, caches the library by a hash of both and of
  the jax version, hands it libcuasync's function table and registers its handler as the target `cuasync_kernel_call`
  for CUDA. Registration is checked, never silent: see `register`.
- `kernel_call(kernel, *arrays, out_shapes=..., grid=..., block=..., scalars=(), shared_memory=0)`: the FFI call.
  The kernel's parameters are the inputs' device pointers, the outputs' device pointers, then `scalars`, packed to
  the kernel's parameter sizes here (a wrong count or size raises ValueError before XLA sees anything). The launch
  goes on XLA's own stream, untracked: XLA orders it with the rest of the computation.

jax is imported when these are used, so `import cuasync.jax` works without it.
"""
import ctypes
import operator
import os
import re
import shutil
import threading
from collections import namedtuple

from . import _capi, _jit, _plugin_build, _runtime, errors

TARGET = "cuasync_kernel_call"
_MARK = "cuasync XLA FFI handler"  # how every refusal of the handler begins (cuasync_xla_ffi.cpp)

KernelSpec = namedtuple("KernelSpec", "source name options", defaults=((),))
KernelSpec.__doc__ = """A kernel by source: compiled (through cuasync's caches) for each local CUDA device."""


class RegistrationError(RuntimeError):
    """The FFI handler could not be built, loaded or registered, or registering it did not take effect."""


def _jax():
    try:
        import jax
        import jax.ffi  # noqa: F401  (jax >= 0.4.38)
    except ImportError as e:
        raise ImportError(f"cuasync.jax needs jax with jax.ffi (pip install 'jax[cuda13]'): {e}") from e
    return jax


# ---- building ------------------------------------------------------------------------------------------------------

def _paths():
    return _plugin_build.sources("cuasync_xla_ffi.cpp", "jax", "CUASYNC_XLA_FFI_SOURCE", "the handler's source",
                                 RegistrationError)


def _ffi_headers(jax_include):
    return [os.path.join(jax_include, "xla", "ffi", "api", f) for f in ("c_api.h", "api.h", "ffi.h")]


def header_ffi_api_version(jax_include):
    """(major, minor) of the XLA FFI API that the running jaxlib ships headers for."""
    path = _ffi_headers(jax_include)[0]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RegistrationError(f"the running jaxlib has no XLA FFI headers ({e})") from e
    found = [re.search(rf"#define XLA_FFI_API_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR")]
    if not all(found):
        raise RegistrationError(f"{path} defines no XLA_FFI_API_MAJOR/MINOR")
    return tuple(int(m.group(1)) for m in found)


def _default_cache_dir():
    return os.path.join(_plugin_build.cache_root(), "xla_ffi")


def _compile(jax, cache_dir):
    """The path of the handler library for this source, header and jax: built unless the cache has it."""
    import jaxlib
    source, include = _paths()
    jax_include = jax.ffi.include_dir()
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if not cxx:
        raise RegistrationError(f"no C++ compiler ({os.environ.get('CXX', 'c++')}) to build the XLA FFI handler")
    key = _plugin_build.key_of([source, os.path.join(include, "cuasync", "cuasync.h")] + _ffi_headers(jax_include),
                               f"{jax.__version__} {getattr(jaxlib, '__version__', '?')} {cxx}", RegistrationError,
                               "the XLA FFI handler")
    out = os.path.join(cache_dir, f"cuasync_xla_ffi-{key[:20]}.so")
    if os.path.exists(out):
        return out
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-I" + jax_include, "-I" + include, source, "-o",
           _plugin_build.temporary(out)]
    _plugin_build.compile_into(cmd, out, RegistrationError, "the XLA FFI handler", 600)
    return out


def _versions(lib):
    v = [ctypes.c_int() for _ in range(4)]
    lib.cuasync_xla_ffi_api_version(*[ctypes.byref(x) for x in v])
    return (v[0].value, v[1].value), (v[2].value, v[3].value)


def _load(path):
    lib = ctypes.CDLL(path)
    lib.cuasync_xla_set_api.argtypes = [ctypes.c_void_p]
    lib.cuasync_xla_set_api.restype = ctypes.c_int
    lib.cuasync_xla_ffi_api_version.argtypes = [ctypes.POINTER(ctypes.c_int)] * 4
    lib.cuasync_xla_ffi_api_version.restype = None
    rc = lib.cuasync_xla_set_api(_capi.api_address())
    if rc:
        why = {1: "no table", 2: "another ABI major", 3: "a table without launch",
               4: "ABI 1.0 (untracked launches need 1.1)"}.get(rc, f"code {rc}")
        raise RegistrationError(f"the XLA FFI handler refused libcuasync's table ({why}): {_capi.library_path()} has "
                                f"ABI {'.'.join(map(str, _capi.abi_version()))}")
    return lib


# ---- registering ---------------------------------------------------------------------------------------------------

def _xla_client():
    try:
        from jax._src.lib import xla_client
        return xla_client
    except ImportError:
        return None


def register(lib, name=TARGET, platform="CUDA", probe=True):
    """Registers `lib`'s handler as FFI target `name`, and makes sure it took: jax keeps a registration for a platform
    whose plugin is not loaded pending without a word, and a handler built against other FFI headers is refused
    only when XLA sees it. Raises RegistrationError instead; with `probe`, also calls the target once under jax.jit
    and expects the handler's own refusal back (which proves XLA reaches it), then compares FFI API versions."""
    jax = _jax()
    xc = _xla_client()
    canonical = getattr(xc, "xla_platform_names", {}).get(platform.lower(), platform)
    if canonical.upper() != "CUDA":
        raise RegistrationError(f"FFI target '{name}' not registered for platform {platform!r}: the cuasync handler "
                                "launches CUDA kernels on XLA's CUDA stream; register it for 'CUDA'")
    try:
        devices = jax.devices("cuda")  # initializes the plugin now, so that registration is not deferred
    except RuntimeError as e:
        raise RegistrationError(f"FFI target '{name}' not registered: jax has no CUDA backend ({e})") from e
    handlers = getattr(xc, "_custom_callback_handler", None)
    if handlers is not None and "CUDA" not in handlers:
        raise RegistrationError(f"FFI target '{name}' not registered: jax's CUDA plugin installed no custom-call "
                                "handler, so jax would only have queued the registration")
    try:
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(lib.cuasync_kernel_call), platform="CUDA")
    except Exception as e:
        raise RegistrationError(f"XLA refused FFI target '{name}': {e}") from e
    pending = getattr(xc, "_custom_callback", {}).get("CUDA", ())
    if any(p[0] == name for p in pending):
        raise RegistrationError(f"FFI target '{name}' was queued by jax, not registered with XLA")
    if probe:
        _probe(jax, name, devices[0])
        (cmaj, cmin), (rmaj, rmin) = _versions(lib)
        if cmaj != rmaj or cmin > rmin:
            raise RegistrationError(f"FFI target '{name}': the handler was built for XLA FFI API {cmaj}.{cmin} but "
                                    f"XLA runs {rmaj}.{rmin}: rebuild it (clear the cache)")


def _probe(jax, name, device):
    import numpy as np
    call = jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((1,), np.uint8))
    attrs = dict(kernels=np.zeros(1, np.int64), grid=np.ones(3, np.int64), block=np.ones(3, np.int64),
                 shared_memory=np.int64(0), scalars=np.zeros(1, np.uint8), scalar_sizes=np.ones(1, np.int64))
    try:
        with jax.default_device(device):
            jax.jit(lambda: call(**attrs))().block_until_ready()
    except Exception as e:
        if _MARK in str(e):
            return  # the handler ran and refused the empty kernel table, as it should
        raise RegistrationError(f"FFI target '{name}' is registered, but a call under jax.jit did not reach the "
                                f"cuasync handler: {type(e).__name__}: {e}") from e
    raise RegistrationError(f"FFI target '{name}': the probe call with no kernel succeeded; this is not cuasync's "
                            "handler")


_lock = threading.Lock()
_handler = None  # the registered library: XLA refuses a second handler under the same name


def build_handler(cache_dir=None):
    """Builds (or finds in `cache_dir`), loads and registers the handler once per process; returns its library."""
    global _handler
    with _lock:
        if _handler is None:
            jax = _jax()
            lib = _load(_compile(jax, cache_dir or _default_cache_dir()))
            compiled = _versions(lib)[0]
            shipped = header_ffi_api_version(jax.ffi.include_dir())
            if compiled != shipped:
                raise RegistrationError(f"the cached handler was built for XLA FFI API {compiled} but this jaxlib "
                                        f"ships {shipped}: clear {cache_dir or _default_cache_dir()}")
            register(lib)
            _handler = lib
        return _handler


# ---- calling -------------------------------------------------------------------------------------------------------

_kernels = {}  # (spec, device) -> Kernel, and id -> Kernel handed in: kept for the process, as the HLO names them
_kernels_lock = threading.Lock()


def _cuda_ordinals(jax):
    try:
        devices = jax.local_devices(backend="cuda")
    except RuntimeError as e:
        raise RuntimeError(f"cuasync.jax.kernel_call needs jax's CUDA backend: {e}") from e
    return sorted(d.local_hardware_id if d.local_hardware_id is not None else d.id for d in devices)


def _for_device(spec, device):
    key = (spec, device)
    with _kernels_lock:
        k = _kernels.get(key)
        if k is None:
            m = _jit.compile(spec.source, f"{spec.name}.cu", spec.options,
                             runtime=_runtime.Runtime.for_device(device))
            k = _kernels[key] = m.kernel(spec.name)
    return k


def _kernel_table(kernel, jax):
    """The `kernels` attribute (a handle per device ordinal) and one Kernel for its parameter sizes."""
    if isinstance(kernel, _jit.Kernel):
        with _kernels_lock:
            _kernels[("kernel", id(kernel))] = kernel
        per_device = {kernel.module.runtime.device: kernel}
    else:
        if isinstance(kernel, tuple):
            spec = KernelSpec(*kernel)
            spec = spec._replace(options=tuple(spec.options))  # a dict key
            kernel = lambda device: _for_device(spec, device)  # noqa: E731
        elif not callable(kernel):
            raise TypeError("kernel_call takes a cuasync.Kernel, a KernelSpec(source, name, options) or a callable "
                            f"device ordinal -> Kernel, not {type(kernel).__name__}")
        per_device = {d: kernel(d) for d in _cuda_ordinals(jax)}
    table = [0] * (max(per_device) + 1)
    for d, k in per_device.items():
        table[d] = k.handle if k.handle < 1 << 63 else k.handle - (1 << 64)
    return table, next(iter(per_device.values()))


def kernel_call(kernel, *arrays, out_shapes, grid, block, scalars=(), shared_memory=0):
    """Calls a cuasync kernel from JAX (traceable: use it inside jax.jit). `out_shapes`: a jax.ShapeDtypeStruct, or a
    list or tuple of them (then a tuple of arrays is returned). The kernel takes the inputs' pointers, the outputs'
    pointers, then `scalars` (a Python int or float per parameter, packed to that parameter's size: pass floats as
    floats). `grid` and `block` are an int or up to 3 ints."""
    jax = _jax()
    import numpy as np
    build_handler()
    single = not isinstance(out_shapes, (list, tuple))
    outs = [out_shapes] if single else list(out_shapes)
    table, k = _kernel_table(kernel, jax)
    sizes, n_buffers, scalars = k.param_sizes, len(arrays) + len(outs), tuple(scalars)
    if len(sizes) != n_buffers + len(scalars):
        raise errors.InvalidArgumentError(
            f"kernel '{k.name}' takes {len(sizes)} parameter(s) but was given {len(arrays)} input(s), {len(outs)} "
            f"output(s) and {len(scalars)} scalar(s)")
    for i, s in enumerate(sizes[:n_buffers]):
        if s != 8:
            raise errors.InvalidArgumentError(
                f"kernel '{k.name}' parameter {i} is {s} bytes, not a pointer: the inputs and outputs come first")
    if any(isinstance(v, jax.Array) for v in scalars):
        raise errors.InvalidArgumentError(f"kernel '{k.name}': scalars are Python numbers, fixed at trace time; pass "
                                          "arrays as inputs")
    packed = [_jit.pack_argument(k.name, n_buffers + i, s, v) for i, (s, v) in enumerate(zip(sizes[n_buffers:],
                                                                                          scalars))]
    dims = [tuple(map(operator.index, _jit._dims(d))) for d in (grid, block)]
    if not all(0 <= v < 1 << 32 for d in dims for v in d):
        raise errors.InvalidArgumentError(f"kernel '{k.name}': grid {grid} and block {block} need ints 0..2^32-1")
    call = jax.ffi.ffi_call(TARGET, outs[0] if single else tuple(outs))
    return call(*arrays, kernels=np.asarray(table, np.int64), grid=np.asarray(dims[0], np.int64),
                block=np.asarray(dims[1], np.int64), shared_memory=np.int64(shared_memory),
                scalars=np.frombuffer(b"".join(packed), np.uint8).copy(),
                scalar_sizes=np.asarray([len(p) for p in packed], np.int64))


__all__ = ["KernelSpec", "RegistrationError", "TARGET", "build_handler", "header_ffi_api_version", "kernel_call",
           "register"]
