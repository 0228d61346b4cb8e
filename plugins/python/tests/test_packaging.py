# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The package as installed (wheel or source tree): its version, which copy is under test, and NVRTC from pip's
nvidia-* wheels handed to the library ($CUASYNC_NVRTC_SEARCH_PATH). No GPU needed."""
import glob
import os
import re
import subprocess
import sys

import pytest

import cuasync
from cuasync import _nvrtc_search

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cuasync.__file__)))  # the package under test
INSTALLED = os.environ.get("CUASYNC_TEST_INSTALLED") == "1"
LDSO = "/lib64/ld-linux-x86-64.so.2"  # run with --inhibit-cache: no NVRTC found by name through /etc/ld.so.cache


def test_version_is_the_cmake_projects():
    with open(os.path.join(REPO, "CMakeLists.txt")) as f:
        m = re.search(r"project\(cuasync VERSION ([0-9.]+)", f.read())
    assert m and cuasync.__version__ == m.group(1), (cuasync.__version__, m and m.group(1))


@pytest.mark.skipif(not INSTALLED, reason="the source tree's package is under test (CUASYNC_TEST_INSTALLED unset)")
def test_the_installed_copy_and_its_own_library_are_under_test():
    package = os.path.dirname(os.path.realpath(cuasync.__file__))
    assert not package.startswith(os.path.realpath(os.path.join(HERE, "..")) + os.sep), package
    assert os.path.dirname(os.path.realpath(cuasync.library_path())) == package, cuasync.library_path()


def _system_nvrtc():
    roots = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda"]
    found = [p for r in roots if r for d in ("lib64", "lib")
             for p in glob.glob(os.path.join(r, d, "libnvrtc.so.1[23]"))]
    return os.path.realpath(found[0]) if found else None


@pytest.fixture
def wheel_site(tmp_path):
    """A site folder laid out as pip's nvidia-cuda-nvrtc leaves it: <site>/nvidia/cu13/lib/libnvrtc.so.13 (a link to
    the toolkit's NVRTC)."""
    real = _system_nvrtc()
    if not real:
        pytest.skip("no CUDA toolkit NVRTC here to stand in for the wheel's")
    lib = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvrtc.so.13").symlink_to(real)
    (tmp_path / "site" / "nvidia" / "cublas" / "lib").mkdir(parents=True)  # another wheel's folder: no NVRTC
    return tmp_path / "site", lib


def test_nvrtc_folders_are_found_in_site_folders(wheel_site, monkeypatch):
    site, lib = wheel_site
    assert _nvrtc_search.nvrtc_dirs([str(site)]) == [str(lib)]
    monkeypatch.setenv(_nvrtc_search.ENV, "/mine")
    assert _nvrtc_search.export_search_path([str(site)]) == os.pathsep.join(["/mine", str(lib)])
    assert _nvrtc_search.export_search_path([str(site)]) == os.pathsep.join(["/mine", str(lib)])  # once only


def test_nvjitlink_folders_are_found_in_site_folders(tmp_path):
    """pip's nvidia-nvjitlink alone (CUDA 12's wheels keep it in a folder of its own): its folder is searched too."""
    lib = tmp_path / "site" / "nvidia" / "nvjitlink" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvJitLink.so.12").write_bytes(b"")
    (tmp_path / "site" / "nvidia" / "cublas" / "lib").mkdir(parents=True)  # another wheel's folder
    assert _nvrtc_search.nvrtc_dirs([str(tmp_path / "site")]) == [str(lib)]


def _exported_search_path(site):
    """$CUASYNC_NVRTC_SEARCH_PATH as a fresh interpreter with `site` on sys.path leaves it once cuasync is loaded."""
    code = (f"import os, sys\nsys.path.append({str(site)!r})\nimport cuasync\ncuasync.abi_version()\n"
            f"print('SEARCH=' + os.environ.get('CUASYNC_NVRTC_SEARCH_PATH', ''))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("CUASYNC_NVRTC_SEARCH_PATH", "CUASYNC_LIBNVRTC")}
    env["PYTHONPATH"] = PACKAGE_ROOT
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    line = [x for x in out.stdout.splitlines() if x.startswith("SEARCH=")]
    assert line, out.stdout + out.stderr
    return line[0][len("SEARCH="):], env


def test_loading_the_library_exports_the_wheel_folders(wheel_site):
    site, lib = wheel_site
    search, _ = _exported_search_path(site)
    assert str(lib) in search.split(os.pathsep), search


def test_the_library_loads_nvrtc_from_an_exported_folder(wheel_site):
    # `cuasync info` (the command beside the library in a build folder) names the NVRTC it loaded. Run without
    # /etc/ld.so.cache, the system's NVRTC is not found by name, so it must come from the exported folders.
    tool = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(cuasync.library_path()))), "tools", "cuasync")
    if not os.path.isfile(tool) or not os.path.exists(LDSO):
        pytest.skip(f"no cuasync command at {tool} (a build folder's) or no {LDSO}")
    site, lib = wheel_site
    search, env = _exported_search_path(site)
    env["CUASYNC_NVRTC_SEARCH_PATH"] = search
    out = subprocess.run([LDSO, "--inhibit-cache", tool, "info"], env=env, capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    line = [x for x in text.splitlines() if "NVRTC" in x and "libnvrtc" in x]
    assert line, text
    assert any(os.path.join(d, "libnvrtc.so.1") in line[0] for d in search.split(os.pathsep)), (search, line[0])
