# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""pytest setup: the package from this repository (or, with CUASYNC_TEST_INSTALLED=1, the one the interpreter has
installed: a wheel), and a `gpu` marker for tests that need a CUDA device."""
import os
import sys

import pytest

if os.environ.get("CUASYNC_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import cuasync  # noqa: E402


def _gpu_reason():
    try:
        n = cuasync.device_count()
    except cuasync.CuasyncError as e:
        return f"no usable CUDA driver ({e.message.splitlines()[0]})"
    return None if n > 0 else "no CUDA device"


GPU_REASON = _gpu_reason()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason=GPU_REASON) if GPU_REASON else None
    left_out = 0
    for item in items:
        if "gpu" in item.keywords or os.sep + "gpu" + os.sep in str(item.fspath):
            if skip:
                item.add_marker(skip)
                left_out += 1
    if left_out:
        config._cuasync_left_out = left_out


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
    config.addinivalue_line("markers", "timeout(seconds): the test's time limit (pytest-timeout, where installed)")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    n = getattr(config, "_cuasync_left_out", 0)
    if n:
        terminalreporter.write_line(f"gpu: {n} test(s) not run: {GPU_REASON}")
