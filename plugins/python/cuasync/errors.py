# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Exceptions: one class per cuasync_error_code, each carrying the CUresult / nvrtcResult and cuasync's message
(which names the call, the kernel, the stream and the device where it can)."""
from __future__ import annotations

import operator


OK, INVALID_ARGUMENT, STALE_HANDLE, UNSUPPORTED, NO_DRIVER, CUDA, COMPILE, OUT_OF_MEMORY, CANCELLED, INTERNAL, BUSY = \
    range(11)


class CuasyncError(Exception):
    """Base of every cuasync error. `code` is the cuasync_error_code, `cuda_result` the CUresult (0 when none),
    `nvrtc_result` the nvrtcResult (0 when none)."""

    code = INTERNAL

    def __init__(self, message: str, cuda_result: int = 0, nvrtc_result: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.cuda_result = cuda_result
        self.nvrtc_result = nvrtc_result


class InvalidArgumentError(CuasyncError, ValueError):
    """Bad input, refused before it reached the GPU."""
    code = INVALID_ARGUMENT


class StaleHandleError(CuasyncError):
    """A handle that was destroyed, never created, or of another kind."""
    code = STALE_HANDLE


class UnsupportedError(CuasyncError):
    """An ABI version, field or feature this library does not have."""
    code = UNSUPPORTED


class NoDriverError(CuasyncError):
    """No NVIDIA driver, only its stub, no device, or a driver too old."""
    code = NO_DRIVER


class LibraryNotFoundError(CuasyncError, ImportError):
    """libcuasync.so itself was not found (CUASYNC_LIBRARY names it)."""
    code = NO_DRIVER


class CudaError(CuasyncError):
    """A CUDA driver error (an illegal address, a launch failure...): see cuda_result."""
    code = CUDA


class CompileError(CuasyncError):
    """NVRTC missing, or a compile error: the message holds NVRTC's log and the offending source line."""
    code = COMPILE


class OutOfMemoryError(CuasyncError, MemoryError):
    """Device or pinned host memory ran out."""
    code = OUT_OF_MEMORY


class CancelledError(CuasyncError):
    """A completion cancelled (its GPU work goes on)."""
    code = CANCELLED


class InternalError(CuasyncError):
    """A bug in cuasync: please report it with the message."""
    code = INTERNAL


class BusyError(CuasyncError):
    """The stream has as much work in flight as cuasync admits; nothing was enqueued."""
    code = BUSY


_BY_CODE = {c.code: c for c in (InvalidArgumentError, StaleHandleError, UnsupportedError, NoDriverError, CudaError,
                                CompileError, OutOfMemoryError, CancelledError, InternalError, BusyError)}


def from_code(code, message, cuda_result=0, nvrtc_result=0):
    return _BY_CODE.get(code, InternalError)(message, cuda_result, nvrtc_result)


def for_record(code, cuda_result, what):
    """The exception for a completion record that did not succeed (`what`: a description, or a callable making one)."""
    what = what() if callable(what) else what
    if code == CUDA:
        return CudaError(f"{what} failed on the GPU: CUresult {cuda_result}", cuda_result)
    return from_code(code, f"{what} completed with cuasync error {code}", cuda_result)


def check_int(value, what, low, high):
    """`value` as an int in [low, high): a TypeError naming `what` for a non-int (a bool or a float too), an
    InvalidArgumentError for one out of range (ctypes would wrap or truncate it silently)."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not a bool ({value!r})")
    try:
        value = operator.index(value)  # ints, and numpy's
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__} ({value!r})") from None
    if not low <= value < high:
        raise InvalidArgumentError(f"{what} {value} is outside [{low}, {high})")
    return value
