# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The C ABI (plugins/include/cuasync/cuasync.h) declared with ctypes, and the one place that calls it.

Every struct below mirrors the header field for field (ABI 1.2; test_layouts.py checks every one, field by field,
against a C probe of cuasync.h).
`call(name, args)` sets `struct_size`, calls the function from the table and turns a returned `cuasync_error*` into a
Python exception. ctypes releases the GIL for the duration of each call, so a call never holds the interpreter while
cuasync or the driver takes a lock. A function added after 1.0 is called only when the library's table has it (`has`).
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Tuple
from ctypes import (POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_size_t, c_uint8, c_uint16, c_uint32,
                    c_uint64, c_void_p)

from . import _nvrtc_search, errors

ABI_MAJOR = 1

# ---- structs -------------------------------------------------------------------------------------------------------


class ErrorInfoArgs(Structure):
    _fields_ = [("struct_size", c_size_t), ("error", c_void_p), ("code", c_int), ("cuda_result", c_int),
                ("nvrtc_result", c_int), ("message", c_char_p), ("message_size", c_size_t)]


class CompletionRecord(Structure):
    _fields_ = [("token", c_uint64), ("code", c_int), ("cuda_result", c_int)]


class Completion(Structure):
    _fields_ = [("queue", c_void_p), ("token", c_uint64), ("callback", c_void_p), ("user_data", c_void_p)]


def _args(*fields):
    return [("struct_size", c_size_t)] + list(fields)


class QueueCreateArgs(Structure):
    _fields_ = _args(("flags", c_uint32), ("queue", c_void_p))


class QueueDestroyArgs(Structure):
    _fields_ = _args(("queue", c_void_p))


class QueueFdArgs(Structure):
    _fields_ = _args(("queue", c_void_p), ("fd", c_int))


class QueueDrainArgs(Structure):
    _fields_ = _args(("queue", c_void_p), ("records", POINTER(CompletionRecord)), ("capacity", c_size_t),
                     ("count", c_size_t))


class HostTokenCreateArgs(Structure):
    _fields_ = _args(("completion", Completion), ("token", c_void_p))


class HostTokenCompleteArgs(Structure):
    _fields_ = _args(("token", c_void_p), ("code", c_int))


class DeviceCountArgs(Structure):
    _fields_ = _args(("count", c_int))


class RuntimeCreateArgs(Structure):
    _fields_ = _args(("device", c_int), ("context", c_void_p), ("runtime", c_void_p))


class RuntimeDestroyArgs(Structure):
    _fields_ = _args(("runtime", c_void_p))


class StreamCreateArgs(Structure):
    _fields_ = _args(("runtime", c_void_p), ("native", c_void_p), ("priority", c_int), ("stream", c_void_p))


class StreamDestroyArgs(Structure):
    _fields_ = _args(("stream", c_void_p))


class StreamNativeArgs(Structure):
    _fields_ = _args(("stream", c_void_p), ("native", c_void_p), ("context", c_void_p))


class StreamWaitArgs(Structure):
    _fields_ = _args(("stream", c_void_p), ("completion", Completion))


class EventRecordArgs(Structure):
    _fields_ = _args(("stream", c_void_p), ("event", c_void_p))


class EventQueryArgs(Structure):
    _fields_ = _args(("event", c_void_p), ("done", c_int))


class EventWaitArgs(Structure):
    _fields_ = _args(("event", c_void_p), ("stream", c_void_p))


class EventDestroyArgs(Structure):
    _fields_ = _args(("event", c_void_p))


class BufferAllocateArgs(Structure):
    _fields_ = _args(("runtime", c_void_p), ("stream", c_void_p), ("kind", c_uint32), ("size", c_size_t),
                     ("buffer", c_void_p), ("pointer", c_void_p))


class BufferFreeArgs(Structure):
    _fields_ = _args(("buffer", c_void_p))


class CopyArgs(Structure):
    _fields_ = _args(("stream", c_void_p), ("dst", c_void_p), ("src", c_void_p), ("size", c_size_t),
                     ("completion", Completion))


class MemsetArgs(Structure):
    _fields_ = _args(("stream", c_void_p), ("dst", c_void_p), ("value", c_uint8), ("size", c_size_t),
                     ("completion", Completion))


class ImportDlpackArgs(Structure):
    _fields_ = _args(("runtime", c_void_p), ("stream", c_void_p), ("managed", c_void_p), ("buffer", c_void_p),
                     ("pointer", c_void_p), ("size", c_size_t), ("released", Completion))


class ExportDlpackArgs(Structure):
    _fields_ = _args(("buffer", c_void_p), ("stream", c_void_p), ("consumer_stream", ctypes.c_ssize_t),
                     ("dtype_code", c_uint8), ("dtype_bits", c_uint8), ("dtype_lanes", c_uint16), ("ndim", c_int32),
                     ("shape", POINTER(c_int64)), ("managed", c_void_p))


class Header(Structure):
    _fields_ = [("name", c_char_p), ("contents", c_char_p)]


class CompileArgs(Structure):
    _fields_ = _args(("runtime", c_void_p), ("name", c_char_p), ("source", c_char_p), ("options", POINTER(c_char_p)),
                     ("num_options", c_size_t), ("headers", POINTER(Header)), ("num_headers", c_size_t),
                     ("name_expressions", POINTER(c_char_p)), ("num_name_expressions", c_size_t),
                     ("module", c_void_p))


class PackageLoadArgs(Structure):
    _fields_ = _args(("runtime", c_void_p), ("directory", c_char_p), ("module", c_void_p),
                     ("num_entry_points", c_size_t))


class ModuleDestroyArgs(Structure):
    _fields_ = _args(("module", c_void_p))


class KernelGetArgs(Structure):
    _fields_ = _args(("module", c_void_p), ("name", c_char_p), ("kernel", c_void_p), ("num_params", c_size_t),
                     ("param_sizes", POINTER(c_size_t)), ("param_sizes_capacity", c_size_t),
                     # ABI 1.4: the parameter types of a C++ kernel
                     ("param_types", POINTER(c_uint32)), ("param_types_capacity", c_size_t),
                     ("param_type_names", POINTER(c_char_p)), ("typed", c_uint32))


class KernelArg(Structure):
    _fields_ = [("value", c_void_p), ("size", c_size_t)]


class LaunchArgs(Structure):
    _fields_ = _args(("stream", c_void_p), ("kernel", c_void_p), ("grid", c_uint32 * 3), ("block", c_uint32 * 3),
                     ("shared_memory_bytes", c_uint32), ("args", POINTER(KernelArg)), ("num_args", c_size_t),
                     ("completion", Completion), ("flags", c_uint32),
                     ("arg_types", POINTER(c_uint32)))  # ABI 1.4


# ABI 1.2


class LibraryVersionArgs(Structure):
    _fields_ = _args(("major", c_uint32), ("minor", c_uint32), ("patch", c_uint32), ("version", c_char_p))


class AdmissionLimitsArgs(Structure):
    _fields_ = _args(("runtime", c_void_p), ("per_stream", c_uint32), ("per_context", c_uint32))


class CompileImageArgs(Structure):
    _fields_ = _args(("arch", c_char_p), ("name", c_char_p), ("source", c_char_p), ("options", POINTER(c_char_p)),
                     ("num_options", c_size_t), ("headers", POINTER(Header)), ("num_headers", c_size_t),
                     ("name_expressions", POINTER(c_char_p)), ("num_name_expressions", c_size_t),
                     ("image", c_void_p), ("data", c_void_p), ("size", c_size_t), ("kind", c_uint32),
                     ("architecture", c_char_p), ("log", c_char_p), ("log_size", c_size_t),
                     ("lowered_names", POINTER(c_char_p)))


class ImageDestroyArgs(Structure):
    _fields_ = _args(("image", c_void_p))


class CompileImageStartArgs(Structure):  # ABI 1.5
    _fields_ = _args(("compile", POINTER(CompileImageArgs)), ("completion", Completion), ("job", c_void_p))


class CompileImageFinishArgs(Structure):  # ABI 1.5
    _fields_ = _args(("job", c_void_p), ("result", POINTER(CompileImageArgs)))


class GraphLaunchArgs(Structure):  # ABI 1.5
    _fields_ = _args(("stream", c_void_p), ("graph_exec", c_void_p), ("completion", Completion))


class ReplayAnchorMarkArgs(Structure):  # ABI 1.6
    _fields_ = _args(("stream", c_void_p), ("fault_check_ns", c_uint64), ("anchor", c_void_p))


class ReplayAnchorWaitArgs(Structure):  # ABI 1.6
    _fields_ = _args(("anchor", c_void_p), ("generation", c_uint64), ("completion", Completion), ("reached", c_uint64))


class ReplayAnchorDestroyArgs(Structure):  # ABI 1.6
    _fields_ = _args(("anchor", c_void_p))


LOG_SINK = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)  # void (*)(void* user, int level, const char* message)


class LogSinkSetArgs(Structure):
    _fields_ = _args(("sink", LOG_SINK), ("user", c_void_p), ("level", c_int))


class FlightRecorderSetArgs(Structure):
    _fields_ = _args(("per_stream", c_uint32), ("stall_ms", c_uint32), ("directory", c_char_p), ("signal", c_int))


class FlightRecorderDumpArgs(Structure):
    _fields_ = _args(("reason", c_char_p), ("format", c_uint32), ("write_files", c_uint32), ("buffer", c_void_p),
                     ("capacity", c_size_t), ("size", c_size_t))


QUEUE_FD = 1
IMAGE_CUBIN, IMAGE_PTX = 0, 1
LOG_FROM_ENVIRONMENT, LOG_OFF, LOG_INFO, LOG_DEBUG = -1, 0, 1, 2
MEMORY_DEVICE, MEMORY_PINNED = 0, 1
LAUNCH_UNTRACKED = 1
FLIGHT_TEXT, FLIGHT_CHROME_JSON = 0, 1

# The function table, in the header's order (append-only).
_CALLS = ["queue_create", "queue_destroy", "queue_fd", "queue_drain", "host_token_create", "host_token_complete",
          "device_count", "runtime_create", "runtime_destroy", "stream_create", "stream_destroy", "stream_native",
          "stream_wait", "event_record", "event_query", "event_wait", "event_destroy", "buffer_allocate",
          "buffer_free", "copy", "memset", "compile", "module_destroy", "kernel_get", "launch", "package_load",
          "buffer_import_dlpack", "buffer_export_dlpack",
          # ABI 1.2
          "library_version", "runtime_admission_get", "runtime_admission_set", "compile_image", "image_destroy",
          "log_sink_set",
          # ABI 1.3
          "flight_recorder_set", "flight_recorder_dump",
          # ABI 1.5
          "compile_image_start", "compile_image_finish", "graph_launch",
          # ABI 1.6
          "replay_anchor_mark", "replay_anchor_wait", "replay_anchor_destroy",
          # ABI 1.7 (on queue_drain's struct)
          "queue_poll"]
_CALL = ctypes.CFUNCTYPE(c_void_p, c_void_p)  # cuasync_error* (*)(args*): ctypes drops the GIL around it


class Api(Structure):
    _fields_ = ([("struct_size", c_size_t), ("abi_major", c_uint32), ("abi_minor", c_uint32),
                 ("error_destroy", ctypes.CFUNCTYPE(None, c_void_p)),
                 ("error_info", ctypes.CFUNCTYPE(None, POINTER(ErrorInfoArgs)))] + [(n, _CALL) for n in _CALLS])


# ---- loading -------------------------------------------------------------------------------------------------------

_SONAME = f"libcuasync.so.{ABI_MAJOR}"  # the SONAME carries the C ABI's major
_lock = threading.Lock()
_loaded = None  # (CDLL, POINTER(Api), path)
_failure = None


def _candidates():
    """Where libcuasync is looked for, in order: $CUASYNC_LIBRARY alone when set; next to this package (the wheel puts
    libcuasync.so.1 there); where `cmake --install` put it (cuasync/_installed.py, written by the install); the
    repository's build folders (a source checkout); then the dynamic loader's search by SONAME."""
    here = os.path.dirname(os.path.abspath(__file__))
    explicit = os.environ.get("CUASYNC_LIBRARY")
    if explicit:
        return [explicit]  # named on purpose: nothing else is tried
    found = [os.path.join(here, n) for n in (_SONAME, "libcuasync.so")]
    try:
        from . import _installed
        found.append(os.path.normpath(os.path.join(here, _installed.LIBRARY)))
    except ImportError:
        pass  # not installed by CMake
    repo = os.path.normpath(os.path.join(here, "..", "..", ".."))
    found += [os.path.join(repo, b, "plugins", "libcuasync.so") for b in ("build", "build-gpu")]
    return found + [_SONAME, "libcuasync.so"]


def _load():
    global _loaded, _failure
    with _lock:
        if _loaded:
            return _loaded
        if _failure:
            raise _failure
        _nvrtc_search.export_search_path()  # before the library can first load NVRTC
        tried = []
        for path in _candidates():
            if os.sep in path and not os.path.exists(path):
                tried.append(path + " (no such file)")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            get_api = lib.cuasync_get_api
            get_api.restype = c_void_p
            get_api.argtypes = [c_uint32, POINTER(POINTER(Api))]
            table = POINTER(Api)()
            err = get_api(ABI_MAJOR, ctypes.byref(table))
            if err:
                _failure = errors.UnsupportedError(
                    f"{path} does not implement cuasync ABI {ABI_MAJOR} (it has ABI {table.contents.abi_major})")
                raise _failure
            _loaded = (lib, table, path)
            return _loaded
        _failure = errors.LibraryNotFoundError(
            "libcuasync.so.1 not found; set CUASYNC_LIBRARY to its path, install the cuasync wheel, or build it "
            "(cmake --build build). Tried: " +
            "; ".join(tried))
        raise _failure


def api():
    return _load()[1].contents


def library_path() -> str:
    """The path of the libcuasync.so in use."""
    return _load()[2]


def api_address():
    """The address of the `const cuasync_api*` table, for native plugins (the XLA FFI handler) that share it."""
    return ctypes.cast(_load()[1], c_void_p).value


def abi_version() -> Tuple[int, int]:
    """The library's C ABI version as (major, minor)."""
    a = api()
    return (a.abi_major, a.abi_minor)


# ---- calls ---------------------------------------------------------------------------------------------------------

_functions = {}


def has(name):
    """True when the loaded library's table has the function `name` (a library older than the ABI minor version that
    added it has a shorter table: the field past its end must never be read)."""
    field = getattr(Api, name)
    return api().struct_size >= field.offset + field.size


def function(name):
    """The table's function `name`, as a ctypes function taking the address of its arguments struct.
    Raises UnsupportedError, saying which ABI the library has, when its table predates `name`."""
    f = _functions.get(name)
    if f is None:
        if not has(name):
            a = api()
            raise errors.UnsupportedError(
                f"{name}: {library_path()} implements cuasync ABI {a.abi_major}.{a.abi_minor}, which predates this "
                "call; use a newer libcuasync.so (CUASYNC_LIBRARY names the one to load)")
        f = _functions[name] = getattr(api(), name)
    return f


def library_version():
    """The loaded libcuasync.so's own version, "MAJOR.MINOR.PATCH" (ABI 1.2's library_version), or None for a library
    older than ABI 1.2, which cannot say."""
    if not has("library_version"):
        return None
    return call("library_version", LibraryVersionArgs()).version.decode()



def raise_error(name, err):
    """Turns a cuasync_error* into the matching exception (and frees it)."""
    a = api()
    info = ErrorInfoArgs(struct_size=ctypes.sizeof(ErrorInfoArgs), error=err)
    a.error_info(ctypes.byref(info))
    message = (info.message or b"").decode("utf-8", "replace")
    code, cuda_result, nvrtc_result = info.code, info.cuda_result, info.nvrtc_result
    a.error_destroy(err)
    raise errors.from_code(code, message, cuda_result, nvrtc_result)


def call(name, args):
    """Calls `name` with `args` (its struct, struct_size set here); raises on error."""
    args.struct_size = ctypes.sizeof(args)
    err = function(name)(ctypes.addressof(args))
    if err:
        raise_error(name, err)
    return args


def call_code(name, args):
    """Like call, but returns the error code instead of raising for BUSY (the caller retries); raises otherwise."""
    args.struct_size = ctypes.sizeof(args)
    return call_code_at(name, ctypes.addressof(args))


def call_code_at(name, address):
    """call_code for arguments already laid out at `address` (struct_size set)."""
    err = function(name)(address)
    return code_of(err, name) if err else 0


def code_of(err, name="call"):
    """BUSY for a BUSY error (freed: the caller retries), else raises the error's exception."""
    a = api()
    info = ErrorInfoArgs(struct_size=ctypes.sizeof(ErrorInfoArgs), error=err)
    a.error_info(ctypes.byref(info))
    if info.code == errors.BUSY:
        a.error_destroy(err)
        return errors.BUSY
    raise_error(name, err)


def release(name, args):
    """Destroys a handle from a finalizer: never raises (a handle something still uses stays alive with it), and does
    nothing once the process is exiting."""
    if exiting:
        return
    try:
        call(name, args)
    except errors.CuasyncError:
        pass


# Set by the atexit hook in __init__: destructors stop calling into the library (the process is going).
exiting = False
