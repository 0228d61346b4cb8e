# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The C++ PyTorch ops' build plumbing (cuasync/_torch_ops.py) without PyTorch: the mode variable, the source found
in a checkout or an install, and a cache key that moves with torch's version and the source (the build itself and
the ops run in tests/gpu/test_torch_native.py)."""
import os
import types

import pytest

from cuasync import _torch_ops


def fake_torch(tmp_path, version="2.11.0", cuda="13.0"):
    root = tmp_path / f"torch-{version}"
    (root / "lib").mkdir(parents=True, exist_ok=True)
    return types.SimpleNamespace(__version__=version, __file__=str(root / "__init__.py"),
                                 version=types.SimpleNamespace(cuda=cuda),
                                 _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True))


def test_mode_defaults_to_auto_and_refuses_unknown_values(monkeypatch):
    monkeypatch.delenv("CUASYNC_TORCH_OPS", raising=False)
    assert _torch_ops.mode() == "auto"
    for m in ("native", "python", "AUTO"):
        monkeypatch.setenv("CUASYNC_TORCH_OPS", m)
        assert _torch_ops.mode() == m.lower()
    monkeypatch.setenv("CUASYNC_TORCH_OPS", "cpp")
    with pytest.raises(ValueError, match="CUASYNC_TORCH_OPS='cpp'"):
        _torch_ops.mode()


def test_the_source_and_header_are_found():
    source, include = _torch_ops._paths()
    assert os.path.basename(source) == "cuasync_torch_ops.cpp" and os.path.isfile(source)
    assert os.path.isfile(os.path.join(include, "cuasync", "cuasync.h"))
    with open(source, encoding="utf-8") as f:
        text = f.read()
    assert 'm.def("scale_add(Tensor x, Tensor y, float alpha) -> Tensor")' in text  # the Python op's schema


def test_cache_key_moves_with_torch_and_source(tmp_path, monkeypatch):
    t1, t2 = fake_torch(tmp_path, "2.11.0"), fake_torch(tmp_path, "2.12.0")
    a, _ = _torch_ops._target(t1, str(tmp_path))
    assert a == _torch_ops._target(t1, str(tmp_path))[0]  # stable
    assert a != _torch_ops._target(t2, str(tmp_path))[0]
    assert a != _torch_ops._target(fake_torch(tmp_path, "2.11.0", cuda="12.8"), str(tmp_path))[0]
    source, _ = _torch_ops._paths()
    changed = tmp_path / "ops.cpp"
    changed.write_text(open(source, encoding="utf-8").read() + "\n// changed\n")
    monkeypatch.setenv("CUASYNC_TORCH_OPS_SOURCE", str(changed))
    assert a != _torch_ops._target(t1, str(tmp_path))[0]


def test_nothing_cached_means_none_and_a_missing_source_is_named(tmp_path, monkeypatch):
    assert _torch_ops.cached(fake_torch(tmp_path), str(tmp_path)) is None
    monkeypatch.setenv("CUASYNC_TORCH_OPS_SOURCE", str(tmp_path / "absent.cpp"))
    with pytest.raises(_torch_ops.BuildError, match="absent.cpp: set CUASYNC_TORCH_OPS_SOURCE"):
        _torch_ops._paths()
    assert _torch_ops.cached(fake_torch(tmp_path), str(tmp_path)) is None  # never raises
