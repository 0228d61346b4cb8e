# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Typed launch arguments (C ABI 1.4) without a GPU: a C++ kernel's launch checks ints, floats, buffers, tensors,
arrays and ctypes values against its decoded parameter types, before anything reaches the library, on the ctypes path
and the compiled fast path (CI runs this file with CUASYNC_PYTHON_FAST=1 and =0); an extern "C" kernel keeps today's
size checks. A value that passes goes on to the library, which refuses the made-up handles (StaleHandleError)."""
import ctypes
import os
import struct
import subprocess
import sys

import pytest

import cuasync
from cuasync import _argtypes as at
from cuasync import _fastpath, _jit, errors

fast = _fastpath.get()
F32, F64, I32 = at.make(at.FLOAT, 4), at.make(at.FLOAT, 8), at.make(at.INTEGER, 4)
F32_PTR = at.make(at.FLOAT, 4, 1)


def _stream():
    """A cuasync Stream whose handle the library never made (its calls fail as a stale handle)."""
    s = cuasync.Stream.__new__(cuasync.Stream)
    s.handle, s.native, s.context, s.runtime, s._owner = 0x5151, 0x7777, 0, None, None
    return s


def _typed():
    """scale<float>(float* x, float a, int n), as kernel_get describes it."""
    return _jit.Kernel(None, 0x4b4b, "scale<float>", (8, 4, 4), (F32_PTR, F32, I32), ("float*", "float", "int"))


def _extern_c():
    return _jit.Kernel(None, 0x4b4b, "scale_f32", (8, 4, 4))


class _Array:
    """Device memory with the CUDA array interface (v3) and a typestr."""

    def __init__(self, typestr, ptr=0x1000):
        self.__cuda_array_interface__ = {"data": (ptr, False), "typestr": typestr, "shape": (4,), "version": 3,
                                         "stream": None}


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name

    def __hash__(self):
        return hash(self.name)

    def __eq__(self, other):
        return isinstance(other, _Dtype) and other.name == self.name


class _Tensor:
    """What a launch reads of a PyTorch tensor: data_ptr(), is_cuda and dtype."""
    is_cuda = True

    def __init__(self, dtype):
        self.dtype = _Dtype(dtype)

    def data_ptr(self):
        return 0x2000


def _launch(kernel, *args):
    """Raises what the launch raises; StaleHandleError means the package let the arguments through."""
    kernel.launch_untracked(_stream(), 1, 1, *args)


def _refused(kernel, args, message):
    with pytest.raises(errors.InvalidArgumentError, match=message):
        _launch(kernel, *args)
    if fast is not None:  # the compiled path leaves it to the package, which refused it above
        assert kernel._fast.pack(_stream(), 1, 1, 0, 0, args) is NotImplemented


def _passed(kernel, *args):
    with pytest.raises(errors.StaleHandleError):
        _launch(kernel, *args)


def test_codes_and_rules_match_the_library():
    assert F32 == 0x01000404 and F32_PTR == 0x01010404 and at.VOID_POINTER == 0x01010001
    assert at.describe(F32_PTR) == "float*" and at.describe(at.make(at.INTEGER, 8)) == "long long"
    assert at.compatible(F32_PTR, at.VOID_POINTER) and at.compatible(F32_PTR, at.I64)  # void*, a CUdeviceptr
    assert not at.compatible(F32_PTR, at.make(at.FLOAT, 8, 1)) and not at.compatible(I32, F32)
    assert at.compatible(at.make(at.OPAQUE, 0), F32)  # a struct parameter: its size decides
    assert at.element_of_typestr("<f8") == F64 and at.element_of_typestr("|b1") == at.make(at.BOOL, 1)


def test_kernel_knows_its_types():
    k = _typed()
    assert k.param_types == (F32_PTR, F32, I32) and "float*, float, int" in repr(k)
    assert _extern_c().param_types == ()


def test_a_float_for_an_integer_is_refused_naming_the_parameter():
    _refused(_typed(), (_Array("<f4"), 2.0, 3.5), r"kernel 'scale<float>' parameter 2 is int but the argument "
                                                   r"given is a float")


def test_a_float64_tensor_for_float_pointer_is_refused():
    _refused(_typed(), (_Array("<f8"), 2.0, 4), r"parameter 0 is float\* but the argument given is double\*")
    _refused(_typed(), (_Tensor("float64"), 2.0, 4), r"parameter 0 is float\* but the argument given is double\* "
                                                     r"\(a _Tensor of torch.float64\)")


def test_an_int_for_a_pointer_is_refused():
    _refused(_typed(), (0x1000, 2.0, 4), r"parameter 0 is float\* but the argument given is an int \(a number, "
                                         r"not an address")


def test_an_address_for_a_number_is_refused():
    _refused(_typed(), (_Array("<f4"), _Array("<f4"), 4), r"parameter 1 is float but the argument given is float\*")


def test_ctypes_and_numpy_like_values_are_typed():
    _refused(_typed(), (_Array("<f4"), ctypes.c_double(2.0), 4), r"parameter 1 is float but the argument given is "
                                                                 r"double \(c_double\)")
    _refused(_typed(), (_Array("<f4"), 2.0, ctypes.c_float(4)), r"parameter 2 is int but the argument given is float")
    _passed(_typed(), ctypes.c_void_p(0x1000), ctypes.c_float(2.0), ctypes.c_int32(4))
    _passed(_typed(), _Array("<f4"), 2.0, b"\x04\0\0\0")  # bytes have no type: the size is checked


def test_fitting_values_pass_and_an_int_for_a_float_is_converted():
    k = _typed()
    _passed(k, _Array("<f4"), 2.0, 4)
    _passed(k, _Tensor("float32"), 2, 4)  # an int for a float parameter
    _passed(k, _Array("<V4"), 2.0, 4)  # elements of no known type: the pointer passes
    if fast is not None:
        blob, uses = k._fast.pack(_stream(), 1, 1, 0, 0, (_Array("<f4"), 2, 4))
        assert blob[120 + 48 + 8:120 + 48 + 12] == struct.pack("<f", 2.0)  # the second value's slot: a float
        assert uses == ((), (0,), (None,))


def test_an_int_too_large_for_a_float_parameter_is_refused():
    with pytest.raises(errors.InvalidArgumentError, match="parameter 1"):
        _launch(_typed(), _Array("<f4"), 10**400, 4)
    if fast is not None:
        assert _typed()._fast.pack(_stream(), 1, 1, 0, 0, (_Array("<f4"), 10**400, 4)) is NotImplemented


def test_the_fast_path_reads_tensor_dtypes_through_the_package_table():
    if fast is None:
        pytest.skip("cuasync._fast is not in use")
    k = _typed()
    t = _Tensor("float32")
    at.dtype_codes.pop(t.dtype, None)
    assert k._fast.pack(_stream(), 1, 1, 0, 0, (t, 2.0, 4)) is NotImplemented  # not in the table yet
    _passed(k, t, 2.0, 4)  # the package reads it, and fills the table
    assert at.dtype_codes[t.dtype] == F32
    assert k._fast.pack(_stream(), 1, 1, 0, 0, (t, 2.0, 4)) is not NotImplemented


def test_extern_c_kernels_keep_size_checks_only():
    k = _extern_c()
    _passed(k, 0x1000, 2.0, 4)  # an int address, as before
    _passed(k, _Array("<f8"), 2.0, 4)  # no types to hold the elements to
    with pytest.raises(errors.InvalidArgumentError, match="parameter 2"):
        _launch(k, 0x1000, 2.0, 2**40)  # out of the int's 4 bytes


_SIMULATED = os.path.join(os.path.dirname(os.path.realpath(cuasync.library_path())), os.pardir, "tests",
                          "fake_driver", "libcuasync_simulated_libcuda.so")
_END_TO_END = r'''
import cuasync
from cuasync import errors
src = r"""template <class T> __global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
extern "C" __global__ void scale_f32(float* x, float a, int n) { scale<float>(x, a, n); }
"""
mod = cuasync.compile(src, name_expressions=["scale<float>"])
k, c = mod.kernel("scale<float>"), mod.kernel("scale_f32")
print("TYPES", k.param_type_names, c.param_types)
s = cuasync.Stream()
x = cuasync.zeros(4, "float32", stream=s)
k.launch(s, 1, 4, x, 2, 4).wait()  # a Buffer for float*, an int converted to the float
c.launch(s, 1, 4, x, 2.0, 4).wait()
try:
    k.launch(s, 1, 4, x, 2.0, 4.0)
except errors.InvalidArgumentError as e:
    print("REFUSED", e)
'''


def run_simulated(code):
    """Runs `code` in a process of its own on the simulated driver (compute capability 9.5, so NVRTC makes PTX,
    which it loads)."""
    env = dict(os.environ, CUASYNC_LIBCUDA=os.path.realpath(_SIMULATED), FAKE_CUDA_DEVICES="1",
               FAKE_CUDA_COMPUTE_CAPABILITY="95", CUASYNC_CACHE="0", CUASYNC_LIBRARY=cuasync.library_path(),
               PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not os.path.exists(_SIMULATED), reason="no simulated driver next to this build's library")
def test_kernel_get_says_the_types_and_a_launch_checks_them_on_the_simulated_driver():
    r = run_simulated(_END_TO_END)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "TYPES ('float*', 'float', 'int') ()" in r.stdout, r.stdout
    assert "REFUSED kernel 'scale<float>' parameter 2 is int but the argument given is a float" in r.stdout, r.stdout
