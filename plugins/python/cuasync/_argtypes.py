# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Typed kernel arguments (C ABI 1.4): a C++ kernel's parameter types, as `kernel_get` decodes them from its mangled
name, and the check of each launch argument against its parameter's type. An `extern "C"` kernel has no types: its
arguments keep the size checks alone.

A type is a cuasync_arg_type code: bits 0-7 its class, 8-15 its size in bytes (of the pointee for a pointer), 16-23
how many pointers deep, bit 24 set. The rules are the library's (`compatible` in kernel_signature.hpp), plus two of
Python's: an int is a number, never an address (a pointer parameter takes a Buffer, a tensor, an array or
`ctypes.c_void_p(address)`), and an int for a floating-point parameter is converted to it, as Python converts ints
to floats."""
from __future__ import annotations

import ctypes
from typing import Any, Optional

SET = 1 << 24
OPAQUE, VOID, BOOL, INTEGER, FLOAT = range(5)


def make(cls: int, size: int, pointers: int = 0) -> int:
    """The code of a type: `make(FLOAT, 4, 1)` is float*."""
    return cls | (size & 0xFF) << 8 | (pointers & 0xFF) << 16 | SET


def kind(code: int) -> int:
    return code & 0xFF


def size(code: int) -> int:
    return code >> 8 & 0xFF


def pointers(code: int) -> int:
    return code >> 16 & 0xFF


VOID_POINTER = make(VOID, 0, 1)
F64 = make(FLOAT, 8)
I64 = make(INTEGER, 8)
_INT_NAMES = {1: "char", 2: "short", 4: "int", 8: "long long", 16: "__int128"}
_FLOAT_NAMES = {2: "half", 4: "float", 8: "double", 16: "long double"}


def describe(code: int) -> str:
    """A C++ spelling of a code, as the library's messages spell it: "float*", "double", "int"."""
    c, n, p = kind(code), size(code), pointers(code)
    base = {OPAQUE: "an opaque type" if p else "an opaque value", VOID: "void", BOOL: "bool",
            INTEGER: _INT_NAMES.get(n, f"a {n}-byte integer"), FLOAT: _FLOAT_NAMES.get(n, f"a {n}-byte float")}[c]
    return base + "*" * p


def compatible(parameter: int, argument: int) -> bool:
    """Whether an argument of type `argument` fits a parameter of type `parameter` (kernel_signature.hpp's rules)."""
    if parameter == argument:
        return True
    pp, ap = pointers(parameter), pointers(argument)

    def address_sized(t):
        return pointers(t) == 0 and (kind(t) == OPAQUE or (kind(t) == INTEGER and size(t) == 8))
    if pp and not ap:
        return address_sized(argument)
    if ap and not pp:
        return address_sized(parameter)
    if not pp:
        return kind(parameter) == OPAQUE or kind(argument) == OPAQUE
    if (pp == 1 and kind(parameter) == VOID) or (ap == 1 and kind(argument) == VOID):
        return True
    return pp == ap and (kind(parameter) == OPAQUE or kind(argument) == OPAQUE)


# Element types by the array interface's typestr kind and by DLPack's type code (bfloat16 is a 2-byte float here: the
# library does not tell it from half).
_TYPESTR_CLASS = {"b": BOOL, "i": INTEGER, "u": INTEGER, "f": FLOAT}
_DLPACK_CLASS = {0: INTEGER, 1: INTEGER, 2: FLOAT, 4: FLOAT, 6: BOOL}
# A framework's dtype object (torch.float32, a numpy dtype) -> its element code; shared with the compiled fast
# path, which reads it for objects whose dtype it cannot read itself, and filled as dtypes are met.
dtype_codes: dict = {}


def element_of_typestr(typestr: str) -> Optional[int]:
    """The element code of an array-interface typestr ("<f4"), or None when it has none here."""
    if len(typestr) < 3 or typestr[1] not in _TYPESTR_CLASS or not typestr[2:].isdigit():
        return None
    return make(_TYPESTR_CLASS[typestr[1]], int(typestr[2:]))


def element_of_dtype(dtype: Any) -> Optional[int]:
    """The element code of a framework's dtype (PyTorch, numpy, CuPy, JAX), or None when it is not known here."""
    try:
        code = dtype_codes.get(dtype)
    except TypeError:  # unhashable
        return None
    if code is not None or dtype in dtype_codes:
        return code
    from . import _dtypes
    try:
        name = _dtypes.canonical(dtype)
    except TypeError:
        code = None
    else:
        code = element_of_typestr(_dtypes.typestr(name)) if name != "bfloat16" else make(FLOAT, 2)
    dtype_codes[dtype] = code
    return code


def element_of(value: Any) -> Optional[int]:
    """The element code of the memory `value` points to (a tensor, an array), or None when not known."""
    dtype = getattr(value, "dtype", None)
    if dtype is not None:
        return element_of_dtype(dtype)
    cai = getattr(value, "__cuda_array_interface__", None)
    if isinstance(cai, dict) and isinstance(cai.get("typestr"), str):
        return element_of_typestr(cai["typestr"])
    return None


_CTYPES_CLASS = {"?": BOOL, "f": FLOAT, "d": FLOAT, "g": FLOAT, "P": VOID, "z": VOID, "Z": VOID}


def code_of_ctypes(value: Any) -> Optional[int]:
    """The code of a ctypes value (c_float, c_int64, c_void_p) or Structure (opaque), or None (bytes: no type)."""
    if isinstance(value, ctypes.Structure):
        return make(OPAQUE, 0)
    t = getattr(type(value), "_type_", None)
    if not isinstance(t, str):
        return None
    cls = _CTYPES_CLASS.get(t, INTEGER if t in "bBhHiIlLqQ" else None)
    if cls is None:
        return None
    return VOID_POINTER if cls == VOID else make(cls, ctypes.sizeof(value))


def element_pointer(element: Optional[int]) -> int:
    """The code of a pointer to `element` (void* when not known)."""
    return VOID_POINTER if element is None else element + (1 << 16)
