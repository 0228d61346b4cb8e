# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The package without a GPU: loading the library, errors, argument checks, dtypes."""
import ctypes
import os
import subprocess
import sys

import pytest

import cuasync
from cuasync import _capi, _dtypes, _jit, errors

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cuasync.__file__)))  # the package under test


def test_library_and_abi():
    assert os.path.exists(cuasync.library_path())
    major, minor = cuasync.abi_version()
    assert major == 1 and minor >= 2, "this package declares the ABI 1.2 structs"
    assert _capi.api().struct_size >= ctypes.sizeof(_capi.Api)


def test_struct_sizes_match_the_header():
    # The C header's sizes on x86-64, as tests/plugins/conformance.c prints them; a drift breaks every call.
    assert ctypes.sizeof(_capi.Completion) == 32
    assert ctypes.sizeof(_capi.CompletionRecord) == 16
    assert _capi.LaunchArgs.flags.offset == 104 and _capi.KernelGetArgs.param_sizes_capacity.offset == 48
    assert _capi.ImportDlpackArgs.released.offset == 56 and ctypes.sizeof(_capi.ImportDlpackArgs) == 88
    # ABI 1.2 (plugins/c_api/src/api.cpp pins the same numbers)
    assert ctypes.sizeof(_capi.LibraryVersionArgs) == 32 and _capi.LibraryVersionArgs.version.offset == 24
    assert ctypes.sizeof(_capi.AdmissionLimitsArgs) == 24 and _capi.AdmissionLimitsArgs.per_context.offset == 20
    assert _capi.CompileImageArgs.image.offset == 80 and _capi.CompileImageArgs.kind.offset == 104
    assert _capi.CompileImageArgs.lowered_names.offset == 136 and ctypes.sizeof(_capi.CompileImageArgs) == 144
    assert ctypes.sizeof(_capi.ImageDestroyArgs) == 16
    assert _capi.LogSinkSetArgs.level.offset == 24 and ctypes.sizeof(_capi.LogSinkSetArgs) == 32  # 28 and padding
    assert _capi.Api.library_version.offset == 256
    # ABI 1.3
    assert ctypes.sizeof(_capi.FlightRecorderSetArgs) == 32 and _capi.FlightRecorderSetArgs.signal.offset == 24
    assert ctypes.sizeof(_capi.FlightRecorderDumpArgs) == 48 and _capi.FlightRecorderDumpArgs.size.offset == 40
    assert _capi.Api.flight_recorder_set.offset == 256 + 6 * 8
    assert _capi.Api.compile_image_start.offset == 256 + 8 * 8  # ABI 1.5
    assert _capi.Api.replay_anchor_mark.offset == 256 + 11 * 8  # ABI 1.6
    assert _capi.Api.queue_poll.offset == 256 + 14 * 8 and ctypes.sizeof(_capi.Api) == 256 + 15 * 8  # ABI 1.7
    assert ctypes.sizeof(_capi.ReplayAnchorMarkArgs) == 32 and ctypes.sizeof(_capi.ReplayAnchorDestroyArgs) == 16
    assert _capi.ReplayAnchorWaitArgs.completion.offset == 24 and ctypes.sizeof(_capi.ReplayAnchorWaitArgs) == 64
    assert ctypes.sizeof(_capi.GraphLaunchArgs) == 56 and _capi.GraphLaunchArgs.completion.offset == 24
    assert _capi.CompileImageStartArgs.completion.offset == 16 and ctypes.sizeof(_capi.CompileImageStartArgs) == 56
    assert ctypes.sizeof(_capi.CompileImageFinishArgs) == 24
    # ABI 1.4: typed arguments (fields appended to two structs)
    assert ctypes.sizeof(_capi.LaunchArgs) == 120 and _capi.LaunchArgs.arg_types.offset == 112
    assert _capi.KernelGetArgs.param_types.offset == 56 and _capi.KernelGetArgs.param_types_capacity.offset == 64
    assert _capi.KernelGetArgs.param_type_names.offset == 72 and _capi.KernelGetArgs.typed.offset == 80
    assert ctypes.sizeof(_capi.KernelGetArgs) == 88  # 84 and padding


def test_missing_library_is_a_clear_import_error():
    code = "import cuasync\ntry:\n    cuasync.device_count()\nexcept cuasync.LibraryNotFoundError as e:\n" \
           "    print('MISSING', e)\n"
    env = dict(os.environ, CUASYNC_LIBRARY="/nonexistent/libcuasync.so", PYTHONPATH=PACKAGE_ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert "MISSING" in out.stdout and "/nonexistent/libcuasync.so" in out.stdout, out.stdout + out.stderr


def test_no_driver_is_reported_as_such():
    env = dict(os.environ, CUASYNC_LIBCUDA="/nonexistent/libcuda.so.1", PYTHONPATH=PACKAGE_ROOT)
    code = "import cuasync\n" \
           "for f in (cuasync.device_count, lambda: cuasync.Runtime(0)):\n" \
           "    try:\n        f()\n    except cuasync.NoDriverError as e:\n        print('NO_DRIVER', e.code)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.count("NO_DRIVER 4") == 2, out.stdout + out.stderr


def test_stale_handles_are_refused():
    with pytest.raises(errors.StaleHandleError):
        _capi.call("stream_destroy", _capi.StreamDestroyArgs(stream=0x12345))
    with pytest.raises(errors.StaleHandleError):
        _capi.call("launch", _capi.LaunchArgs(stream=0x777, kernel=0x778))


def test_untracked_launch_with_a_completion_is_refused():
    q = _capi.call("queue_create", _capi.QueueCreateArgs(flags=_capi.QUEUE_FD)).queue
    try:
        with pytest.raises((errors.InvalidArgumentError, errors.StaleHandleError)):
            _capi.call("launch", _capi.LaunchArgs(stream=0x777, kernel=0x778, flags=_capi.LAUNCH_UNTRACKED,
                                                  completion=_capi.Completion(queue=q, token=1)))
        with pytest.raises((errors.UnsupportedError, errors.StaleHandleError)):
            _capi.call("launch", _capi.LaunchArgs(stream=0x777, kernel=0x778, flags=0x80))
    finally:
        _capi.call("queue_destroy", _capi.QueueDestroyArgs(queue=q))


@pytest.mark.parametrize("size,value,expected", [
    (4, 7, (7).to_bytes(4, "little")), (4, -1, b"\xff\xff\xff\xff"), (8, 2**63, (2**63).to_bytes(8, "little")),
    (4, 1.5, b"\x00\x00\xc0\x3f"), (8, True, (1).to_bytes(8, "little")), (4, ctypes.c_uint32(5), b"\x05\0\0\0"),
    (2, b"ab", b"ab"),
])
def test_arguments_are_packed_at_the_parameter_size(size, value, expected):
    assert _jit.pack_argument("k", 0, size, value) == expected


@pytest.mark.parametrize("size,value,what", [
    (4, 2**32, "does not fit"), (1, -129, "does not fit"), (3, 1, "cannot fill"), (4, object(), "cannot pass"),
    (4, ctypes.c_double(1.0), "has 8 bytes"), (1, 1.0, "2, 4 or 8"),
])
def test_bad_arguments_name_the_kernel_and_parameter(size, value, what):
    with pytest.raises(errors.InvalidArgumentError) as e:
        _jit.pack_argument("saxpy", 3, size, value)
    assert "saxpy" in str(e.value) and "parameter 3" in str(e.value) and what in str(e.value)


def test_dtypes():
    assert _dtypes.canonical("float32") == "float32"
    assert _dtypes.canonical("torch.bfloat16") == "bfloat16"
    assert _dtypes.canonical("<f4") == "float32"
    assert _dtypes.dlpack("bfloat16") == (4, 16)
    assert _dtypes.from_dlpack(2, 32, 1) == "float32"
    with pytest.raises(TypeError):
        _dtypes.canonical("complex256")
    with pytest.raises(TypeError):
        _dtypes.from_dlpack(2, 32, 4)


def test_errors_are_python_exceptions_of_the_right_kind():
    assert issubclass(cuasync.InvalidArgumentError, ValueError)
    assert issubclass(cuasync.OutOfMemoryError, MemoryError)
    e = errors.from_code(errors.CUDA, "launch: illegal address", 700)
    assert isinstance(e, cuasync.CudaError) and e.cuda_result == 700


@pytest.mark.parametrize("shape,why", [
    (-5, "outside"), ((4, -1), "outside"), (2**64 + 16, "outside"), (3.0, "neither an int"), ((2.0,), "must be an int"),
    ((True,), "must be an int"), ((2**40, 2**40), "past 2\\*\\*63"),
])
def test_bad_shapes_are_refused_before_any_call(shape, why):
    # Checked in Python before the library is asked (a negative size would wrap to 2**64 - 5 in c_size_t).
    with pytest.raises(errors.InvalidArgumentError, match=why):
        cuasync.empty(shape, "float32")


@pytest.mark.parametrize("make,error,why", [
    (lambda: cuasync.Runtime(1.5), TypeError, "Runtime: device must be an int"),
    (lambda: cuasync.Runtime(-1), errors.InvalidArgumentError, "outside"),
    (lambda: cuasync.Runtime(0, context="x"), TypeError, "context"),
    (lambda: cuasync.Stream("x"), TypeError, "must be a cuasync.Runtime"),
    (lambda: cuasync.Stream.adopt(2**64), errors.InvalidArgumentError, "CUstream"),
    (lambda: cuasync.Stream.adopt(True), TypeError, "not a CUDA stream"),
])
def test_bad_arguments_name_themselves_before_any_call(make, error, why):
    with pytest.raises(error, match=why):
        make()
