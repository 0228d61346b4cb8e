# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""PyTorch's C++-dispatch ops (plugins/torch/cuasync_torch_ops.cpp): built against the running torch, then, in a fresh
process that takes them (CUASYNC_TORCH_OPS=native), the same checks as the Python custom op's (opcheck, torch.compile
fullgraph, CUDA graph replay, autograd) and a refusal with cuasync's words. The Python op is tested in test_torch.py
(that process keeps whichever implementation it imported)."""
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("PyTorch sees no CUDA device", allow_module_level=True)

import cuasync  # noqa: E402
from cuasync import _torch_ops  # noqa: E402

pytestmark = pytest.mark.timeout(900)
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cuasync.__file__)))

CHECKS = textwrap.dedent("""
    import torch, cuasync.torch as ct
    assert ct.implementation() == "native", ct.implementation()
    ct.scale_add.warm_up()
    x = torch.randn(1 << 16, device="cuda"); y = torch.randn(1 << 16, device="cuda")
    torch.testing.assert_close(torch.ops.cuasync.scale_add(x, y, 2.5), 2.5 * x + y, rtol=0, atol=0)
    torch.library.opcheck(torch.ops.cuasync.scale_add.default, (x, y, 2.5))
    xg = torch.randn(64, device="cuda", requires_grad=True); yg = torch.randn(64, device="cuda", requires_grad=True)
    torch.library.opcheck(torch.ops.cuasync.scale_add.default, (xg, yg, -1.0))
    torch.ops.cuasync.scale_add(xg, yg, 3.0).sum().backward()
    torch.testing.assert_close(xg.grad, torch.full_like(xg, 3.0)); torch.testing.assert_close(yg.grad, torch.ones_like(yg))
    f = torch.compile(lambda a, b: torch.ops.cuasync.scale_add(a * 2, b, 0.5).sin(), fullgraph=True)
    torch.testing.assert_close(f(x, y), (0.5 * (x * 2) + y).sin())
    side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.ops.cuasync.scale_add(x, y, 2.0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = torch.ops.cuasync.scale_add(x, y, 2.0)
    for v in (1.0, -3.0, 5.0):
        x.fill_(v); g.replay()
        torch.testing.assert_close(out, 2.0 * x + y, rtol=0, atol=0)
    with torch.cuda.stream(side):  # on a side stream: ordered by PyTorch like its own kernels
        z = torch.ops.cuasync.scale_add(x, y, -1.0)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(z, -1.0 * x + y, rtol=0, atol=0)
    try:
        torch.ops.cuasync.scale_add(x.double(), y.double(), 1.0)
    except RuntimeError as e:
        assert "cuasync::scale_add: float32 tensors only" in str(e), e
    else:
        raise AssertionError("a float64 tensor was taken")
    print("native ops ok")
""")


def test_cpp_ops_build_load_and_pass_the_custom_op_checks(tmp_path):
    ops_dir = str(tmp_path / "torch_ops")  # cache_dir() is $CUASYNC_CACHE_DIR/torch_ops
    path = _torch_ops.build(torch, ops_dir)
    assert os.path.isfile(path) and _torch_ops.cached(torch, ops_dir) == path
    env = dict(os.environ, CUASYNC_TORCH_OPS="native", CUASYNC_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", CHECKS], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "native ops ok" in r.stdout, r.stdout[-4000:] + r.stderr[-8000:]
    assert not [f for f in os.listdir(ops_dir) if f.endswith(".tmp")]  # the subprocess built nothing more


def test_auto_mode_takes_the_python_op_when_nothing_is_built(tmp_path):
    env = dict(os.environ, CUASYNC_TORCH_OPS="auto", CUASYNC_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    code = "import cuasync.torch as ct; print(ct.implementation())"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "python", r.stdout + r.stderr[-4000:]
