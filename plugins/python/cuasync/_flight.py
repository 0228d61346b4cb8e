# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The flight recorder (ABI 1.3): the last operations of every stream, dumped after a hang or a fault."""
from __future__ import annotations

import ctypes
import os
import signal as _signal
from typing import Optional

from . import _capi


def enable_flight_recorder(per_stream: int = 128, stall_ms: int = 10_000, directory: Optional[str] = None,
                           signal: int = int(_signal.SIGUSR1)) -> None:
    """Turns the flight recorder on: every stream keeps its last `per_stream` operations (the driver call, the kernel
    or copy, the launch's grid, block and parameter sizes, a copy's bytes, the completion awaiting it, when it was
    issued and when it was seen done). The recorder dumps by itself, as text on stderr and as text and Chrome trace
    JSON files in `directory` (the current one by default), when an operation has been in flight `stall_ms` on a
    stream that is still busy (0: never), when a completion fails with a device fault, and on `signal` (0: none;
    installed only when nothing else handles it). ``CUASYNC_FLIGHT=1`` in the environment does the same when the
    driver loads. Costs ~20-30 ns of host time per operation while on. Raises InvalidArgumentError for a
    `per_stream` outside 8 .. 65536."""
    for name, value in (("per_stream", per_stream), ("stall_ms", stall_ms), ("signal", signal)):
        if not isinstance(value, int) or value < 0:
            raise ValueError(f"enable_flight_recorder: {name} must be a non-negative int, not {value!r}")
    if per_stream == 0:
        raise ValueError("enable_flight_recorder: per_stream must be 8 .. 65536 (disable_flight_recorder turns it off)")
    _capi.call("flight_recorder_set", _capi.FlightRecorderSetArgs(
        per_stream=per_stream, stall_ms=stall_ms, directory=os.fsencode(directory) if directory else None,
        signal=signal))


def disable_flight_recorder() -> None:
    """Stops recording; what was recorded stays readable by `flight_recorder_dump`."""
    _capi.call("flight_recorder_set", _capi.FlightRecorderSetArgs(per_stream=0))


def flight_recorder_dump(format: str = "text", reason: Optional[str] = None, write_files: bool = False) -> str:
    """What the flight recorder holds now: `format` "text" (which calls are in flight on which stream and device, and
    from where) or "chrome" (Chrome trace event JSON, a lane per stream, for Perfetto). `reason` heads the dump.
    `write_files` also writes it to stderr and the dump files, as the recorder's own dumps are. Never waits for
    the GPU."""
    formats = {"text": _capi.FLIGHT_TEXT, "chrome": _capi.FLIGHT_CHROME_JSON}
    if format not in formats:
        raise ValueError(f"flight_recorder_dump: format must be 'text' or 'chrome', not {format!r}")
    args = _capi.FlightRecorderDumpArgs(reason=reason.encode() if reason else None, format=formats[format],
                                        write_files=1 if write_files else 0)
    _capi.call("flight_recorder_dump", args)  # the size first
    while True:
        buffer = ctypes.create_string_buffer(args.size + 1)
        args.write_files, args.buffer, args.capacity = 0, ctypes.addressof(buffer), len(buffer)
        needed = args.size
        _capi.call("flight_recorder_dump", args)
        if args.size <= needed:  # a dump that grew meanwhile is asked for again
            return buffer.raw[:args.size].decode("utf-8", "replace")
