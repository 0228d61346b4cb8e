# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""cuasync's log (which libcuda and NVRTC were loaded, JIT cache hits and misses, fallbacks taken) forwarded to
Python's `logging`, logger "cuasync", through ABI 1.2's log sink.

The sink runs on the thread that logs: the caller's own in a cuasync call (ctypes released the GIL for the call; the
callback takes it back), or one of cuasync's threads. cuasync holds none of its locks while it calls the sink, and no
Python thread holds the GIL while it waits for a cuasync thread (every call into the library goes through ctypes,
which releases it), so the GIL taken in the callback cannot deadlock: a cuasync thread that logs waits for the GIL at
most as long as any Python thread would. Removing the sink (at exit, or `set_log_level(None)`) waits for calls that
are running, so none is made once the interpreter tears down."""
from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Optional, Union

from . import _capi, errors

logger = logging.getLogger("cuasync")

_LEVELS = {_capi.LOG_INFO: logging.INFO, _capi.LOG_DEBUG: logging.DEBUG}
_NAMES = {"off": _capi.LOG_OFF, "info": _capi.LOG_INFO, "debug": _capi.LOG_DEBUG}
_lock = threading.Lock()
_installed = False


def _forward(user, level, message):
    try:
        logger.log(_LEVELS.get(level, logging.DEBUG), "%s", message.decode("utf-8", "replace"))
    except Exception:  # an exception must not cross into C; logging reports its own handler errors
        pass


_SINK = _capi.LOG_SINK(_forward)  # kept alive for the process: the library holds its address


def _level_of(level):
    if level is None or isinstance(level, str):
        if level is None:
            return _capi.LOG_OFF
        try:
            return _NAMES[level.lower()]
        except KeyError:
            raise errors.InvalidArgumentError(f"set_log_level: {level!r} is not 'off', 'info' or 'debug'") from None
    if level <= logging.DEBUG:
        return _capi.LOG_DEBUG
    if level <= logging.INFO:
        return _capi.LOG_INFO
    return _capi.LOG_OFF


def set_log_level(level: Optional[Union[str, int]]) -> None:
    """Forwards cuasync's log to the `logging` logger "cuasync" at `level`: "debug", "info" or "off", or a `logging`
    level (DEBUG, INFO; anything above INFO turns it off, cuasync logging nothing above INFO). None removes the sink:
    the log goes back to stderr, as CUASYNC_LOG says. Raises UnsupportedError with a library older than ABI 1.2."""
    global _installed
    with _lock:
        if level is None:
            if _installed:
                back = _capi.LogSinkSetArgs(sink=_capi.LOG_SINK(), level=_capi.LOG_FROM_ENVIRONMENT)
                _capi.call("log_sink_set", back)
                _installed = False
            return
        _capi.call("log_sink_set", _capi.LogSinkSetArgs(sink=_SINK, level=_level_of(level)))
        _installed = True


def install_at_import():
    """At the package's import: forwards the log when CUASYNC_LOG is set (adding a stderr handler to the "cuasync"
    logger if logging has none, so that the lines still show) or when logging has a handler already. Quiet when the
    library cannot be loaded or is older than ABI 1.2: the package's import must not fail for a log."""
    env = os.environ.get("CUASYNC_LOG", "").strip().lower()
    if not env and not logger.hasHandlers():
        return
    try:
        if not _capi.has("log_sink_set"):
            return
        if env:
            if env not in _NAMES and env not in ("0", "1", "2"):
                return  # the library says what is wrong with the variable, on stderr
            level = {"0": "off", "1": "info", "2": "debug"}.get(env, env)
            if not logger.hasHandlers():
                handler = logging.StreamHandler()
                handler.setFormatter(logging.Formatter("cuasync: %(levelname)s: %(message)s"))
                logger.addHandler(handler)
            if logger.level == logging.NOTSET:
                logger.setLevel(logging.DEBUG if level == "debug" else logging.INFO)
            set_log_level(level)
        else:
            set_log_level(logger.getEffectiveLevel())
    except errors.CuasyncError:
        return


@atexit.register
def _remove_at_exit():
    # Before the interpreter tears down: no cuasync thread may call into Python after that.
    try:
        set_log_level(None)
    except errors.CuasyncError:
        pass
