# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""DLPack capsules from Python with ctypes: the struct layouts (declared here, as dlpack.h defines them), capsules
for exports, and reading a producer's capsule for imports.

Exchange rules kept here (what users of other libraries trip over):
- an exported capsule that nobody consumed calls its deleter when it dies; a consumed one (renamed by the consumer)
  is the consumer's to delete: exactly once either way;
- an imported capsule is never renamed: cuasync keeps it, unconsumed, until its work on the tensor is done, and then
  drops it, so the producer's own capsule destructor calls its deleter, once, on a Python thread holding the GIL.
"""
import ctypes
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
FLAG_READ_ONLY = 1


class Device(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class Tensor(Structure):
    _fields_ = [("data", c_void_p), ("device", Device), ("ndim", c_int32), ("dtype", DataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, c_void_p)


class Version(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class ManagedVersioned(Structure):
    _fields_ = [("version", Version), ("manager_ctx", c_void_p), ("deleter", _DELETER), ("flags", c_uint64),
                ("dl_tensor", Tensor)]


class ManagedLegacy(Structure):
    _fields_ = [("dl_tensor", Tensor), ("manager_ctx", c_void_p), ("deleter", _DELETER)]


assert ctypes.sizeof(Tensor) == 48 and ctypes.sizeof(ManagedVersioned) == 80 and ctypes.sizeof(ManagedLegacy) == 64

# Capsule names live as long as the process: a capsule keeps a pointer to its name.
VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
LEGACY = ctypes.create_string_buffer(b"dltensor")

# Our own handle on the interpreter's C API: ctypes.pythonapi is shared, and other libraries set argtypes on its
# functions (PyCapsule_New with a c_char_p name, say) that would then refuse ours.
_api = ctypes.PyDLL(None)
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [c_void_p, c_void_p]
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [c_void_p, c_void_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, c_void_p, c_void_p]


@_DELETER
def _capsule_destructor(capsule):
    # Called as the capsule dies (the GIL held). Still named: never consumed, so its tensor is deleted here.
    for name, layout in ((VERSIONED, ManagedVersioned), (LEGACY, ManagedLegacy)):
        if _api.PyCapsule_IsValid(capsule, ctypes.addressof(name)):
            p = _api.PyCapsule_GetPointer(capsule, ctypes.addressof(name))
            m = layout.from_address(p)
            if m.deleter:
                m.deleter(p)
            return


_DESTRUCTOR = ctypes.cast(_capsule_destructor, c_void_p).value

# Legacy (pre-1.0) exports wrap a versioned tensor: its deleter, called by the consumer, deletes that one.
_legacy_exports = {}


@_DELETER
def _legacy_deleter(pointer):
    entry = _legacy_exports.pop(pointer, None)
    if entry is not None:
        legacy, versioned = entry
        m = ManagedVersioned.from_address(versioned)
        if m.deleter:
            m.deleter(versioned)


def capsule_for(versioned_pointer, legacy):
    """A capsule that owns the tensor at `versioned_pointer` (from cuasync's export)."""
    if not legacy:
        return _api.PyCapsule_New(versioned_pointer, ctypes.addressof(VERSIONED), _DESTRUCTOR)
    v = ManagedVersioned.from_address(versioned_pointer)
    wrapper = ManagedLegacy(dl_tensor=v.dl_tensor, manager_ctx=None, deleter=_legacy_deleter)
    _legacy_exports[ctypes.addressof(wrapper)] = (wrapper, versioned_pointer)
    return _api.PyCapsule_New(ctypes.addressof(wrapper), ctypes.addressof(LEGACY), _DESTRUCTOR)


def open_capsule(capsule):
    """(pointer to a DLManagedTensorVersioned, the objects to keep alive with it, flags) for a producer's capsule.
    A legacy capsule is given a versioned twin without a deleter: the capsule itself stays the owner."""
    addr = id(capsule)  # CPython: the object's address, what the capsule API takes
    if _api.PyCapsule_IsValid(addr, ctypes.addressof(VERSIONED)):
        p = _api.PyCapsule_GetPointer(addr, ctypes.addressof(VERSIONED))
        m = ManagedVersioned.from_address(p)
        return p, (capsule,), m.flags, m.dl_tensor
    if _api.PyCapsule_IsValid(addr, ctypes.addressof(LEGACY)):
        p = _api.PyCapsule_GetPointer(addr, ctypes.addressof(LEGACY))
        old = ManagedLegacy.from_address(p)
        twin = ManagedVersioned(version=Version(1, 0), manager_ctx=None, flags=0, dl_tensor=old.dl_tensor)
        return ctypes.addressof(twin), (capsule, twin), 0, twin.dl_tensor
    raise BufferError("not a DLPack capsule, or one already consumed (its name is not 'dltensor_versioned' or "
                      "'dltensor')")
