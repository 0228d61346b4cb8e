# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The compiled fast path, `cuasync._fast` (plugins/python/native: a CPython extension on the stable ABI), when it is
there: prepared launches, completion drains and DLPack's C exchange API without ctypes. The package works the same
without it, on ctypes alone.

Where it is looked for: in the package (the wheel and `cmake --install` put `_fast.abi3.so` there), then next to the
libcuasync.so in use (a CMake build folder, for a source checkout). $CUASYNC_PYTHON_FAST: "0" never uses it, "1"
requires it (an ImportError naming where it was looked for), unset or anything else uses it when found.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading

from . import _capi

_lock = threading.Lock()
_state = []  # [module or None] once looked for
_where = []  # where it was looked for, for the error of a required one


def _find():
    mode = os.environ.get("CUASYNC_PYTHON_FAST", "")
    if mode == "0":
        return None
    if sys.version_info < (3, 10):  # built on the 3.10 stable ABI (METH_FASTCALL): 3.9 runs on ctypes
        _where.append(f"Python {sys.version.split()[0]} (the extension needs 3.10+)")
        module = None
    else:
        module = _import()
    if module is None:
        if mode == "1":
            raise ImportError("CUASYNC_PYTHON_FAST=1 but cuasync._fast was not found: build it (cmake --build "
                              "BUILD --target cuasync_python_fast; Debian: apt-get install python3-dev). Tried: " +
                              "; ".join(_where))
        return None
    from ._memory import Buffer
    from ._argtypes import dtype_codes
    module.bind(_capi.api_address(), Buffer, _capi.raise_error)
    module.set_dtype_codes(dtype_codes)  # typed launches read tensors' dtypes through the package's table
    return module


def _import():
    """The extension module, or None (where it was looked for goes to _where)."""
    try:
        from . import _fast as module  # the wheel's and an installed package's copy
    except ImportError as e:
        _where.append(f"cuasync._fast ({e})")
        module = None
    if module is None:
        # A source checkout: the build folder's, next to its libcuasync.so.
        path = os.path.join(os.path.dirname(os.path.realpath(_capi.library_path())), "_fast.abi3.so")
        if os.path.exists(path):
            try:
                loader = importlib.machinery.ExtensionFileLoader("cuasync._fast", path)
                spec = importlib.util.spec_from_file_location("cuasync._fast", path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
            except ImportError as e:
                _where.append(f"{path} ({e})")
                module = None
        else:
            _where.append(f"{path} (no such file)")
    return module


def get():
    """The bound `cuasync._fast` module, or None (absent, or turned off with CUASYNC_PYTHON_FAST=0)."""
    if _state:
        return _state[0]
    with _lock:
        if not _state:
            _state.append(_find())
    return _state[0]


def enabled() -> bool:
    """True when the compiled fast path is in use."""
    return get() is not None
