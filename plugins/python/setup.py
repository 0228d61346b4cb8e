# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Builds the cuasync wheel (pyproject.toml holds the metadata): the package, plus what it loads and compiles at run
time, copied into it at build time:
  cuasync/libcuasync.so.1             from the CMake build folder $CUASYNC_BUILD_DIR (default: the repository's
                                      build/): <dir>/plugins/libcuasync.so.1, its SONAME link (the file it names is
                                      copied: a wheel holds no links);
  cuasync/_ffi/cuasync_xla_ffi.cpp    the XLA FFI handler's source (plugins/jax), compiled by cuasync.jax;
  cuasync/_ffi/cuasync_torch_ops.cpp  the C++ PyTorch ops' source (plugins/torch), compiled by cuasync.torch;
  cuasync/_ffi/include/cuasync/cuasync.h;
  cuasync/_fast.abi3.so               the compiled fast path (plugins/python/native, stable ABI), from the same build
                                      folder when it was built there (optional: the package runs on ctypes without);
  cuasync/cuasync-jit-worker          the compile farm's worker process (CUASYNC_JIT_FARM), beside the library, where
                                      the library looks for it (optional: without it the farm compiles in process).
The wheel is tagged py3-none-<platform> (linux_x86_64): the Python is version-independent, the library is not."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGINS = os.path.dirname(HERE)
SONAME = "libcuasync.so.1"
FAST = "_fast.abi3.so"
WORKER = "cuasync-jit-worker"


def _library():
    build = os.environ.get("CUASYNC_BUILD_DIR") or os.path.join(os.path.dirname(PLUGINS), "build")
    path = os.path.join(os.path.abspath(build), "plugins", SONAME)
    if not os.path.isfile(path):
        raise SystemExit(f"cuasync wheel: {path} not found: build the C ABI first (cmake --build <dir> --target "
                         f"cuasync_c_api) and set CUASYNC_BUILD_DIR to that CMake build folder")
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise SystemExit(f"cuasync wheel: {path} is not a shared library")
    return path


class build_py_with_native(build_py):
    """The package's modules, then the library and the JAX and PyTorch plugins' sources beside them."""

    def run(self):
        super().run()
        package = os.path.join(self.build_lib, "cuasync")
        native = [(_library(), os.path.join(package, SONAME)),
                  (os.path.join(PLUGINS, "jax", "cuasync_xla_ffi.cpp"),
                   os.path.join(package, "_ffi", "cuasync_xla_ffi.cpp")),
                  (os.path.join(PLUGINS, "torch", "cuasync_torch_ops.cpp"),
                   os.path.join(package, "_ffi", "cuasync_torch_ops.cpp")),
                  (os.path.join(PLUGINS, "include", "cuasync", "cuasync.h"),
                   os.path.join(package, "_ffi", "include", "cuasync", "cuasync.h"))]
        fast = os.path.join(os.path.dirname(_library()), FAST)
        if os.path.isfile(fast):
            native.append((fast, os.path.join(package, FAST)))
        worker = os.path.join(os.path.dirname(_library()), WORKER)
        if os.path.isfile(worker):
            native.append((worker, os.path.join(package, WORKER)))
        for source, target in native:
            if not os.path.isfile(source):
                raise SystemExit(f"cuasync wheel: {source} not found (build from a cuasync source checkout)")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)  # follows the SONAME link to the versioned file
            self.announce(f"cuasync wheel: {source} -> {target}", level=2)
        for f in (SONAME, FAST, WORKER):
            if os.path.isfile(os.path.join(package, f)):
                os.chmod(os.path.join(package, f), 0o755)


class native_distribution(Distribution):
    """Not pure: the package ships a native library, so the wheel is a platform wheel installed into platlib."""

    def has_ext_modules(self):
        return True


class bdist_platform_wheel(bdist_wheel):
    """A platform wheel that any Python 3 can use: py3-none-<platform>. Its one extension module, _fast.abi3.so, is
    on the stable ABI of CPython 3.10+ and optional (another interpreter runs the package on ctypes)."""

    def get_tag(self):
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(distclass=native_distribution, cmdclass={"build_py": build_py_with_native, "bdist_wheel": bdist_platform_wheel})
