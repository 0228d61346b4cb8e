# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Builds and loads cuasync's C++ PyTorch ops (plugins/torch/cuasync_torch_ops.cpp): dispatch in C++, no Python per call.

The library is compiled with the system C++ compiler against the running torch's headers and libraries (nothing of
torch at cuasync's build time), cached by a hash of its source, cuasync.h, torch's version and the compiler, and
loaded with `torch.ops.load_library`. `CUASYNC_TORCH_OPS` picks the path `cuasync.torch` takes at import:
  auto    (default) the C++ ops when the cache has them built for this torch, else the Python custom op (a first
          import never waits for a compile: `cuasync.torch.build_ops()` or `python -m cuasync.torch build` fills it);
  native  the C++ ops, built now if the cache lacks them (a failure raises);
  python  the `torch.library.custom_op` path.
"""
import ctypes
import glob
import os
import shutil
import sys
import sysconfig

from . import _capi, _plugin_build

SOURCE_NAME = "cuasync_torch_ops.cpp"


class BuildError(RuntimeError):
    """The C++ ops could not be built or loaded."""


def mode():
    m = os.environ.get("CUASYNC_TORCH_OPS", "auto").strip().lower() or "auto"
    if m not in ("auto", "native", "python"):
        raise ValueError(f"CUASYNC_TORCH_OPS={m!r}: expected auto, native or python")
    return m


def _paths():
    return _plugin_build.sources(SOURCE_NAME, "torch", "CUASYNC_TORCH_OPS_SOURCE", "the C++ ops' source", BuildError)


def _cuda_include(torch):
    """A folder with cuda_runtime_api.h (c10/cuda's headers include it): the toolkit, or pip's nvidia packages."""
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    try:
        from torch.utils import cpp_extension
        if cpp_extension.CUDA_HOME:
            candidates.append(os.path.join(cpp_extension.CUDA_HOME, "include"))
    except Exception:  # noqa: BLE001  (cpp_extension probes the system on import; its absence is not an error)
        pass
    candidates.append("/usr/local/cuda/include")
    for site in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
                 os.path.dirname(os.path.dirname(torch.__file__))}:
        candidates += sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))
    for c in candidates:
        if os.path.isfile(os.path.join(c, "cuda_runtime_api.h")):
            return c
    raise BuildError("no cuda_runtime_api.h for PyTorch's CUDA headers: set CUDA_HOME (looked in "
                     + ", ".join(candidates) + ")")


def _torch_dirs(torch):
    root = os.path.dirname(torch.__file__)
    return ([os.path.join(root, "include"), os.path.join(root, "include", "torch", "csrc", "api", "include")],
            os.path.join(root, "lib"))


def cache_dir():
    return os.path.join(_plugin_build.cache_root(), "torch_ops")


def _target(torch, directory):
    """The cached library's path for this source, cuasync.h, torch and compiler (it need not exist), and the build."""
    source, include = _paths()
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    if not cxx:
        raise BuildError(f"no C++ compiler ({os.environ.get('CXX', 'c++')}) to build cuasync's C++ ops")
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    key = _plugin_build.key_of((source, os.path.join(include, "cuasync", "cuasync.h")),
                               f"{torch.__version__} {torch.version.cuda} {abi} {cxx} {sys.implementation.cache_tag}",
                               BuildError, "cuasync's C++ ops")
    return os.path.join(directory, f"cuasync_torch_ops-{key[:20]}.so"), (cxx, source, include, abi)


def _compile(torch, out, build):
    cxx, source, include, abi = build
    includes, libdir = _torch_dirs(torch)
    cmd = [cxx, "-std=c++17", "-O2", "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={abi}"]
    cmd += ["-I" + d for d in includes + [_cuda_include(torch), include]]
    cmd += [source, "-L" + libdir, "-Wl,-rpath," + libdir, "-lc10", "-lc10_cuda", "-ltorch_cpu", "-ltorch"]
    cmd += ["-o", _plugin_build.temporary(out)]
    _plugin_build.compile_into(cmd, out, BuildError, "cuasync's C++ ops", 900)


def build(torch, directory=None):
    """The path of the C++ ops' library for the running torch: compiled unless the cache has it (~1 min once)."""
    out, how = _target(torch, directory or cache_dir())
    if not os.path.exists(out):
        _compile(torch, out, how)
    return out


def cached(torch, directory=None):
    """The cached library's path when it was built for the running torch, else None (nothing is compiled)."""
    try:
        out, _ = _target(torch, directory or cache_dir())
    except (BuildError, OSError):
        return None
    return out if os.path.exists(out) else None


class NativeOps:
    """The loaded library: its ops registered with torch, libcuasync's table handed to it."""

    def __init__(self, torch, path):
        try:
            torch.ops.load_library(path)  # registers cuasync::scale_add's schema and CUDA kernel
            lib = ctypes.CDLL(path)  # the same loaded object: its C entry points
        except OSError as e:
            raise BuildError(f"loading cuasync's C++ ops ({path}) failed: {e}") from e
        lib.cuasync_torch_ops_set_api.argtypes = [ctypes.c_void_p]
        lib.cuasync_torch_ops_set_api.restype = ctypes.c_int
        lib.cuasync_torch_ops_warm_up.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
        lib.cuasync_torch_ops_warm_up.restype = ctypes.c_int
        rc = lib.cuasync_torch_ops_set_api(_capi.api_address())
        if rc:
            why = {1: "no table", 2: "another ABI major", 3: "a table without launch",
                   4: "ABI 1.0 (untracked launches need 1.1)"}.get(rc, f"code {rc}")
            raise BuildError(f"cuasync's C++ ops refused libcuasync's table ({why}): {_capi.library_path()} has ABI "
                             f"{'.'.join(map(str, _capi.abi_version()))}")
        self.path, self._lib = path, lib

    def warm_up(self, device_index):
        message = ctypes.create_string_buffer(4096)
        if self._lib.cuasync_torch_ops_warm_up(int(device_index), message, len(message)):
            raise RuntimeError(message.value.decode(errors="replace"))
