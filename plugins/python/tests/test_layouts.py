# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The ctypes structures against the C compiler's view of cuasync.h: every struct the header defines is found by
parsing it, a C probe generated from that list prints each one's sizeof and every field's offsetof and size, and each
must equal the package's ctypes Structure, field for field, in order. A struct added to the header without its ctypes
twin fails here, and so does a field that moved. Needs a C compiler (cc; CI has Debian's gcc)."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import cuasync
from cuasync import _capi, _dlpack

_PACKAGE = os.path.dirname(os.path.abspath(cuasync.__file__))
# The installed package's copy of the header (the wheel's _ffi), else the source tree's.
_INCLUDE = next(d for d in (os.path.join(_PACKAGE, "_ffi", "include"),
                            os.path.join(_PACKAGE, "..", "..", "include")) if os.path.isdir(d))

# Header structs whose ctypes twin is not the CamelCase of their name without "cuasync_".
_TWINS = {
    "cuasync_buffer_import_dlpack_args": _capi.ImportDlpackArgs,
    "cuasync_buffer_export_dlpack_args": _capi.ExportDlpackArgs,
    "cuasync_dlpack_version": _dlpack.Version,
    "cuasync_dl_device": _dlpack.Device,
    "cuasync_dl_data_type": _dlpack.DataType,
    "cuasync_dl_tensor": _dlpack.Tensor,
    "cuasync_dl_managed_tensor_versioned": _dlpack.ManagedVersioned,
}


def header_structs(text):
    """{typedef name: [field names in order]} of every `typedef struct ... { ... } name;` in C source `text`."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    structs = {}
    for m in re.finditer(r"typedef\s+struct\s+\w*\s*\{([^{}]*)\}\s*(\w+)\s*;", text):
        fields = []
        for decl in m.group(1).split(";"):
            decl = " ".join(decl.split())
            if not decl:
                continue
            pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)", decl)  # a function pointer: void (*name)(...)
            plain = re.search(r"(\w+)\s*(\[\s*\w+\s*\])?$", decl)
            fields.append(pointer.group(1) if pointer else plain.group(1))
        structs[m.group(2)] = fields
    return structs


def twin(name):
    if name in _TWINS:
        return _TWINS[name]
    camel = "".join(part.capitalize() for part in name[len("cuasync_"):].split("_"))
    return getattr(_capi, camel, None)


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler (cc) to build the layout probe")
    with open(os.path.join(_INCLUDE, "cuasync", "cuasync.h")) as f:
        structs = header_structs(f.read())
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "cuasync/cuasync.h"', "int main(void) {"]
    for name, fields in structs.items():
        lines.append(f'  printf("S {name} %zu\\n", sizeof({name}));')
        for field in fields:
            lines.append(f'  printf("F {name} {field} %zu %zu\\n", offsetof({name}, {field}), '
                         f'sizeof((({name}*)0)->{field}));')
    lines += ["  return 0;", "}"]
    work = tmp_path_factory.mktemp("layout_probe")
    source, exe = work / "probe.c", work / "probe"
    source.write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-I", _INCLUDE, "-o", str(exe), str(source)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    sizes, offsets = {}, {}
    for line in out.splitlines():
        kind, name, *rest = line.split()
        if kind == "S":
            sizes[name] = int(rest[0])
        else:
            offsets.setdefault(name, []).append((rest[0], int(rest[1]), int(rest[2])))
    return structs, sizes, offsets


def test_the_header_parse_finds_every_struct(probed):
    structs, sizes, _ = probed
    # Every struct body the header opens (counted without the parse), 44 at ABI 1.2, and the probe printed them all.
    with open(os.path.join(_INCLUDE, "cuasync", "cuasync.h")) as f:
        opened = len(re.findall(r"^typedef struct \w+ \{", f.read(), flags=re.M))
    assert len(structs) == opened >= 44 and set(sizes) == set(structs)
    assert structs["cuasync_launch_args"] == ["struct_size", "stream", "kernel", "grid", "block",
                                              "shared_memory_bytes", "args", "num_args", "completion", "flags",
                                              "arg_types"]
    assert structs["cuasync_dl_managed_tensor_versioned"][2] == "deleter"


def test_every_header_struct_has_its_ctypes_twin(probed):
    structs, _, _ = probed
    missing = [name for name in structs if twin(name) is None]
    assert not missing, f"structs of cuasync.h without a ctypes Structure in cuasync._capi: {missing}"


def test_every_ctypes_layout_equals_the_compilers(probed):
    structs, sizes, offsets = probed
    wrong = []
    for name in structs:
        cls = twin(name)
        if cls is None:
            continue  # reported by the test above
        if ctypes.sizeof(cls) != sizes[name]:
            wrong.append(f"{name}: sizeof {sizes[name]}, {cls.__name__} {ctypes.sizeof(cls)}")
        names = [f[0] for f in cls._fields_]
        if names != [f for f, _, _ in offsets.get(name, [])]:
            wrong.append(f"{name}: fields {[f for f, _, _ in offsets.get(name, [])]}, {cls.__name__} {names}")
            continue
        for field, offset, size in offsets.get(name, []):
            d = getattr(cls, field)
            if (d.offset, d.size) != (offset, size):
                wrong.append(f"{name}.{field}: offset {offset} size {size}, {cls.__name__} {d.offset} {d.size}")
    assert not wrong, "\n".join(wrong)
