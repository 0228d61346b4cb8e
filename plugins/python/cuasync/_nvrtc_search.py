# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""NVRTC and nvJitLink from pip wheels: `nvidia-cuda-nvrtc` puts libnvrtc.so.13 in site-packages/nvidia/<name>/lib
(cu13/lib for CUDA 13's wheel, cuda_nvrtc/lib for CUDA 12's), `nvidia-nvjitlink` libnvJitLink.so.13 likewise. libcuasync cannot know where site-packages is, so the package hands
those folders to it in $CUASYNC_NVRTC_SEARCH_PATH (':'-separated), which its NVRTC loader tries after
$CUASYNC_LIBNVRTC and the system's libnvrtc.so.13 / .12 (its nvJitLink loader after $CUASYNC_LIBNVJITLINK and the
system's libnvJitLink.so.13 / .12). Folders already in the variable (set by the user) stay
first. The variable is set in this process's environment, so child processes inherit it."""
import glob
import os
import site
import sys

ENV = "CUASYNC_NVRTC_SEARCH_PATH"


def _site_dirs():
    """The interpreter's package folders: sys.path in import order, then site's own list (user site last)."""
    dirs = [d for d in sys.path if d]
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # an old virtualenv's site module
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def nvrtc_dirs(site_dirs=None):
    """The folders `<site>/nvidia/*/lib` holding a libnvrtc.so* or a libnvJitLink.so*, in the order of `site_dirs`
    (default: the interpreter's package folders), each once."""
    found = []
    for d in _site_dirs() if site_dirs is None else site_dirs:
        libs = []
        for name in ("libnvrtc.so*", "libnvJitLink.so*"):
            libs += glob.glob(os.path.join(glob.escape(d), "nvidia", "*", "lib", name))
        for lib in sorted(libs):
            folder = os.path.dirname(os.path.abspath(lib))
            if folder not in found:
                found.append(folder)
    return found


def export_search_path(site_dirs=None):
    """Adds `nvrtc_dirs(site_dirs)` to $CUASYNC_NVRTC_SEARCH_PATH (after what it holds) and returns its value."""
    current = [d for d in os.environ.get(ENV, "").split(os.pathsep) if d]
    added = [d for d in nvrtc_dirs(site_dirs) if d not in current]
    if added:
        os.environ[ENV] = os.pathsep.join(current + added)
    return os.environ.get(ENV, "")
