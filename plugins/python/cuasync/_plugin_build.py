# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""What the framework plugins built at run time share (the XLA FFI handler in cuasync.jax, the C++ PyTorch ops in
cuasync.torch): the cache folder, a key over their inputs, and a compile that installs a whole file or none."""
import hashlib
import os
import subprocess


_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def sources(name, checkout_folder, source_var, what, error):
    """The plugin source `name` and the folder holding cuasync/cuasync.h: from an installed package's cuasync/_ffi
    (the wheel, cmake --install), else from a source checkout (plugins/<checkout_folder>, plugins/include); the
    variables `source_var` and CUASYNC_INCLUDE_DIR override them. A missing one raises `error` naming the variable."""
    shipped = os.path.join(_PACKAGE, "_ffi")
    if os.path.isfile(os.path.join(shipped, name)):
        source, include = os.path.join(shipped, name), os.path.join(shipped, "include")
    else:
        source = os.path.join(_PACKAGE, "..", "..", checkout_folder, name)
        include = os.path.join(_PACKAGE, "..", "..", "include")
    source = os.path.normpath(os.environ.get(source_var) or source)
    include = os.path.normpath(os.environ.get("CUASYNC_INCLUDE_DIR") or include)
    for thing, path, var in ((what, source, source_var),
                             ("cuasync.h", os.path.join(include, "cuasync", "cuasync.h"), "CUASYNC_INCLUDE_DIR")):
        if not os.path.isfile(path):
            raise error(f"{thing} is not at {path}: set {var}")
    return source, include


def cache_root():
    """$CUASYNC_CACHE_DIR, else $XDG_CACHE_HOME/cuasync, else ~/.cache/cuasync."""
    return os.environ.get("CUASYNC_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "cuasync")


def key_of(paths, extra, error, what):
    """A hex digest of the files' contents and `extra` (a str); an unreadable file raises `error` naming `what`."""
    key = hashlib.sha256()
    for path in paths:
        try:
            with open(path, "rb") as f:
                key.update(f.read())
        except OSError as e:
            raise error(f"cannot build {what}: {e}") from e
    key.update(extra.encode())
    return key.hexdigest()


def compile_into(cmd, out, error, what, timeout):
    """Runs the compiler command `cmd` (which writes the file named by its last argument, a temporary beside `out`)
    and moves the result to `out` atomically: concurrent builders (pytest workers) each install a whole file."""
    tmp = cmd[-1]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise error(f"building {what} failed: {' '.join(cmd)}: {e}") from e
    if r.returncode != 0:
        raise error(f"building {what} failed ({' '.join(cmd)}):\n{r.stderr[-8000:]}")
    os.replace(tmp, out)


def temporary(out):
    """The temporary file a compile writes before compile_into installs it as `out`."""
    return f"{out}.{os.getpid()}.tmp"
