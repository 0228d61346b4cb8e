# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Element types by name, without numpy: the array-interface typestr and the DLPack (code, bits) of each."""

# name: (typestr, DLPack code, bits). DLPack codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool.
_TYPES = {
    "bool": ("|b1", 6, 8), "int8": ("|i1", 0, 8), "int16": ("<i2", 0, 16), "int32": ("<i4", 0, 32),
    "int64": ("<i8", 0, 64), "uint8": ("|u1", 1, 8), "uint16": ("<u2", 1, 16), "uint32": ("<u4", 1, 32),
    "uint64": ("<u8", 1, 64), "float16": ("<f2", 2, 16), "float32": ("<f4", 2, 32), "float64": ("<f8", 2, 64),
    "bfloat16": ("<V2", 4, 16),
}
_BY_DLPACK = {(code, bits): name for name, (_, code, bits) in _TYPES.items()}
_BY_TYPESTR = {ts: name for name, (ts, _, _) in _TYPES.items()}


def canonical(dtype):
    """The name of a dtype given as a name ("float32"), a numpy/CuPy dtype, a PyTorch dtype, or a typestr."""
    if dtype is None:
        return "uint8"
    if isinstance(dtype, str):
        name = dtype[6:] if dtype.startswith("torch.") else dtype
        if name in _TYPES:
            return name
        if name in _BY_TYPESTR:
            return _BY_TYPESTR[name]
        if name.replace("=", "<") in _BY_TYPESTR:
            return _BY_TYPESTR[name.replace("=", "<")]
    for attr in ("name",):  # numpy / CuPy dtypes
        n = getattr(dtype, attr, None)
        if isinstance(n, str) and n in _TYPES:
            return n
    s = str(dtype)
    if s.startswith("torch.") and s[6:] in _TYPES:
        return s[6:]
    if s in ("<class 'float'>",):
        return "float64"
    raise TypeError(f"unsupported dtype {dtype!r} (supported: {', '.join(_TYPES)})")


def itemsize(name):
    return _TYPES[name][2] // 8


def typestr(name):
    return _TYPES[name][0]


def dlpack(name):
    return _TYPES[name][1], _TYPES[name][2]


def from_dlpack(code, bits, lanes):
    if lanes != 1 or (code, bits) not in _BY_DLPACK:
        raise TypeError(f"unsupported DLPack dtype (code {code}, bits {bits}, lanes {lanes})")
    return _BY_DLPACK[(code, bits)]
