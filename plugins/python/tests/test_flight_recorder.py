# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The flight recorder from Python (ABI 1.3), without a GPU: on and off, its dump in both formats, bad arguments."""
import json
import os

import pytest

import cuasync
from cuasync import errors


@pytest.fixture
def recorder(tmp_path):
    cuasync.enable_flight_recorder(per_stream=32, stall_ms=0, directory=str(tmp_path), signal=0)
    yield tmp_path
    cuasync.disable_flight_recorder()


def test_dump_as_text_and_chrome_json(recorder):
    text = cuasync.flight_recorder_dump(reason="a test's dump")
    assert text.startswith("cuasync flight recorder (pid %d): a test's dump" % os.getpid())
    assert "the last 32 operations of each stream are kept" in text
    doc = json.loads(cuasync.flight_recorder_dump(format="chrome"))
    assert isinstance(doc["traceEvents"], list)
    assert doc["metadata"]["reason"] == "asked for by the caller"


def test_dump_with_files(recorder, capfd):
    text = cuasync.flight_recorder_dump(reason="written", write_files=True)
    assert "written" in text
    files = sorted(p.name for p in recorder.iterdir())
    assert any(f.endswith(".txt") for f in files) and any(f.endswith(".json") for f in files), files
    assert "cuasync flight recorder" in capfd.readouterr().err


def test_bad_arguments():
    with pytest.raises(errors.InvalidArgumentError):
        cuasync.enable_flight_recorder(per_stream=4)
    with pytest.raises(ValueError):
        cuasync.enable_flight_recorder(per_stream=0)
    with pytest.raises(ValueError):
        cuasync.flight_recorder_dump(format="xml")
