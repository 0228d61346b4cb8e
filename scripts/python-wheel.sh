#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The pip wheel, built and tested as a user installs it.
#   scripts/python-wheel.sh build BUILD_DIR OUT_DIR
#       builds dist/cuasync-<version>-py3-none-linux_x86_64.whl under OUT_DIR from a copy of plugins/ and the
#       libcuasync.so.1 of the CMake build folder BUILD_DIR (python3 -m build --no-isolation --wheel: Debian's
#       python3-build, python3-setuptools, python3-wheel; nothing downloaded), and checks what the wheel holds.
#   scripts/python-wheel.sh test WHEEL WORK_DIR [pytest arguments...]
#       installs WHEEL with `pip install --no-index` into a fresh venv WORK_DIR/venv that also sees the interpreter's
#       own packages (pytest, uvloop, PyTorch...: --system-site-packages, and a .pth naming the interpreter's
#       site-packages for an interpreter that is itself a venv, as on the GPU machine), then, from outside the source
#       tree and with $CUASYNC_LIBRARY unset, imports it (its __version__, __file__ and library must be the venv's)
#       and runs the Python suite (plugins/python/tests) against that installed copy (CUASYNC_TEST_INSTALLED=1).
#   scripts/python-wheel.sh all BUILD_DIR OUT_DIR [pytest arguments...]   (CTest python_wheel): both.
# The interpreter: $CUASYNC_PYTHON, else python3 when it has pytest, else /usr/bin/python3.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: python-wheel.sh build|test|all ...}
shift
python=""
for p in ${CUASYNC_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null && "$p" -c "import pytest" 2>/dev/null; then python=$(command -v "$p"); break; fi
done
if [ -z "$python" ]; then
  echo "python-wheel: no python3 with pytest (scripts/setup.sh installs python3-pytest)" >&2
  exit 1
fi

build_wheel() {
  local build out stage
  build=$(realpath "$1")
  out=$(realpath -m "$2")
  if ! "$python" -c "import build, setuptools, wheel" 2>/dev/null; then
    echo "python-wheel: $python lacks build, setuptools or wheel (scripts/test.sh installs python3-build," \
         "python3-setuptools, python3-wheel)" >&2
    exit 1
  fi
  rm -rf "$out/stage" "$out/dist"
  stage=$out/stage/plugins
  mkdir -p "$stage"
  # A copy: the build writes build/ and *.egg-info beside pyproject.toml, which stay out of the checkout.
  for d in python jax torch include; do
    (cd "$src/plugins" && find "$d" -name __pycache__ -prune -o -name build -prune -o -name '*.egg-info' -prune \
       -o -type f -print) | while read -r f; do
      mkdir -p "$stage/$(dirname "$f")"
      cp -p "$src/plugins/$f" "$stage/$f"
    done
  done
  echo "python-wheel: building the wheel with $python from $build/plugins/libcuasync.so.1"
  (cd "$stage/python" && CUASYNC_BUILD_DIR=$build "$python" -m build --no-isolation --wheel --outdir "$out/dist" . \
     > "$out/build.log" 2>&1) || { cat "$out/build.log"; echo "python-wheel: the build failed" >&2; exit 1; }
  # What the wheel must hold, and its tag.
  "$python" - "$out/dist" "$build" <<'EOF'
import glob, os, sys, zipfile
wheels = glob.glob(sys.argv[1] + "/*.whl")
assert len(wheels) == 1, wheels
name = wheels[0].rsplit("/", 1)[1]
assert name.endswith("-py3-none-linux_x86_64.whl"), f"{name}: not a py3-none-linux_x86_64 wheel"
files = zipfile.ZipFile(wheels[0]).namelist()
for f in ("cuasync/__init__.py", "cuasync/_capi.py", "cuasync/_version.py", "cuasync/libcuasync.so.1",
          "cuasync/_ffi/cuasync_xla_ffi.cpp", "cuasync/_ffi/cuasync_torch_ops.cpp",
          "cuasync/_ffi/include/cuasync/cuasync.h"):
    assert f in files, f"{name} lacks {f}"
if os.path.exists(os.path.join(sys.argv[2], "plugins", "_fast.abi3.so")):  # built: the wheel must carry it
    assert "cuasync/_fast.abi3.so" in files, f"{name} lacks cuasync/_fast.abi3.so, which the build has"
stray = [f for f in files if f.startswith(("tests/", "cuasync/tests")) or "__pycache__" in f]
assert not stray, f"{name} holds {stray}"
wheel_meta = [f for f in files if f.endswith(".dist-info/WHEEL")]
meta = zipfile.ZipFile(wheels[0]).read(wheel_meta[0]).decode()
assert "Root-Is-Purelib: false" in meta and "Tag: py3-none-linux_x86_64" in meta, meta
fast = ", the fast path (_fast.abi3.so)" if "cuasync/_fast.abi3.so" in files else ""
print(f"python-wheel: {name}: {len(files)} files, libcuasync.so.1{fast} and the JAX and PyTorch plugins' sources inside")
EOF
}

test_wheel() {
  local wheel work venv vpy site
  wheel=$(realpath "$1")
  work=$(realpath -m "$2")
  shift 2
  rm -rf "$work/venv" "$work/run"
  mkdir -p "$work/run"
  venv=$work/venv
  vpy=$venv/bin/python
  local pip=("$vpy" -m pip)
  if ! "$python" -m venv --system-site-packages "$venv" 2>"$work/venv.log"; then
    # An interpreter without ensurepip: a venv without pip, filled by the interpreter's own pip (pip >= 22.3).
    rm -rf "$venv"
    if "$python" -m venv --system-site-packages --without-pip "$venv" 2>>"$work/venv.log" &&
       "$python" -m pip --python "$vpy" --version >/dev/null 2>&1; then
      pip=("$python" -m pip --python "$vpy")
    else
      cat "$work/venv.log" >&2
      echo "python-wheel: $python -m venv failed (Debian: apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  # The creating interpreter's own site-packages, after the venv's: the frameworks of an interpreter that is a venv.
  site=$("$vpy" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  "$python" -c "import site; print('\n'.join(site.getsitepackages()))" > "$site/_cuasync_outer_site.pth"
  "${pip[@]}" install --no-index --no-deps --disable-pip-version-check -q "$wheel"
  cd "$work/run"  # outside the source tree: nothing there is importable as cuasync
  env -u CUASYNC_LIBRARY -u PYTHONPATH "$vpy" - "$venv" "$src" <<'EOF'
import os, sys
import cuasync
venv, src = (os.path.realpath(p) for p in sys.argv[1:3])
here = os.path.realpath(cuasync.__file__)
lib = os.path.realpath(cuasync.library_path())
from cuasync import _fastpath
fast = _fastpath.get()
print(f"python-wheel: cuasync {cuasync.__version__} from {here}, library {lib}, ABI {cuasync.abi_version()}, "
      f"fast path {fast.__file__ if fast else 'not in use'}")
if fast is not None:
    assert os.path.realpath(fast.__file__).startswith(venv + os.sep), f"the fast path {fast.__file__} is not the wheel's"
assert here.startswith(venv + os.sep), f"imported {here}, not the venv's copy"
assert lib == os.path.join(os.path.dirname(here), "libcuasync.so.1"), f"loaded {lib}, not the wheel's library"
EOF
  echo "python-wheel: the Python suite against the installed copy"
  local timeout_args=()
  "$vpy" -c "import pytest_timeout" 2>/dev/null && timeout_args=(--timeout=600)
  env -u CUASYNC_LIBRARY -u PYTHONPATH CUASYNC_TEST_INSTALLED=1 \
    "$vpy" -m pytest "$src/plugins/python/tests" -q -p no:cacheprovider "${timeout_args[@]}" "$@"
}

case "$mode" in
  build) build_wheel "$1" "$2" ;;
  test) test_wheel "$@" ;;
  all)
    build_wheel "$1" "$2"
    out=$(realpath -m "$2")
    shift 2
    test_wheel "$out"/dist/*.whl "$out" "$@" ;;
  *) echo "usage: python-wheel.sh build BUILD_DIR OUT | test WHEEL WORK [pytest args] | all BUILD_DIR OUT [...]" >&2
     exit 2 ;;
esac
