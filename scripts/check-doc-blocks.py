#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The documentation's code is the examples' code: every C, C++, Python or CMake block of the given Markdown files
must follow a marker naming the file it comes from, and must equal that file (or a snippet of it), so what a reader
copies is what CI compiles and runs. CTest `doc_code_blocks` runs it.

    <!-- code: examples/tutorial/service.cpp -->          the whole file
    <!-- code: examples/tutorial/service.cpp#request -->  the lines between two `// [request]` (or `# [request]`)
                                                          lines of it (or `/* [request] */`), common indentation removed

Usage: scripts/check-doc-blocks.py [--write] FILE.md...   (--write copies the files into the blocks)
"""
import difflib
import pathlib
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- code: (?P<path>[^#\s]+)(?:#(?P<snippet>[\w-]+))? -->$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
CODE_LANGUAGES = {"c", "cpp", "c++", "python", "py", "cmake"}  # shell lines and output may stand alone


def snippet(path, name):
    text = (ROOT / path).read_text()
    if name is None:
        return text
    tag = re.compile(r"^\s*(//|#|/\*) \[" + re.escape(name) + r"\]( \*/)?\s*$")
    lines = text.splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if tag.match(line)]
    if len(marks) != 2:
        raise ValueError(f"{path}: snippet [{name}] needs exactly two marker lines, found {len(marks)}")
    return textwrap.dedent("".join(lines[marks[0] + 1:marks[1]]))


def check(md, write):
    lines = md.read_text().splitlines(keepends=True)
    out, problems, i = [], [], 0
    pending = None  # (path, snippet, line number) of the marker just seen
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line.rstrip("\n"))
        if m:
            pending = (m["path"], m["snippet"], i + 1)
            out.append(line)
            i += 1
            continue
        f = FENCE.match(line.rstrip("\n"))
        if not f or not f["lang"] and pending is None:
            if pending and line.strip():
                problems.append(f"{md}:{pending[2]}: the marker is not followed by a code block")
                pending = None
            out.append(line)
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip("\n") == "```"), None)
        if end is None:
            problems.append(f"{md}:{i + 1}: code block without its closing fence")
            out.extend(lines[i:])
            break
        body = "".join(lines[i + 1:end])
        if pending is None:
            if f["lang"].lower() in CODE_LANGUAGES:
                problems.append(f"{md}:{i + 1}: a {f['lang']} block that comes from no file (put it under examples/ "
                                "and name it with <!-- code: PATH -->)")
            out.extend(lines[i:end + 1])
        else:
            path, name, where = pending
            try:
                want = snippet(path, name)
            except (OSError, ValueError) as e:
                problems.append(f"{md}:{where}: {e}")
                want = body
            if want and not want.endswith("\n"):
                want += "\n"
            if body != want and not write:
                diff = "".join(difflib.unified_diff(want.splitlines(True), body.splitlines(True),
                                                    f"{path}{'#' + name if name else ''}", f"{md}:{i + 2}"))
                problems.append(f"{md}:{i + 1}: the block differs from {path} (scripts/check-doc-blocks.py --write "
                                f"{md} copies it):\n{diff}")
            out.append(line)
            out.append(want)
            out.append(lines[end])
        pending = None
        i = end + 1
    if write:
        md.write_text("".join(out))
    return problems


def main(argv):
    write = "--write" in argv
    files = [pathlib.Path(a) for a in argv if a != "--write"]
    if not files:
        print(__doc__, file=sys.stderr)
        return 2
    problems = [p for md in files for p in check(md, write)]
    for p in problems:
        print(p)
    if problems:
        print(f"check-doc-blocks: {len(problems)} problems", file=sys.stderr)
        return 1
    print(f"check-doc-blocks: every code block of {', '.join(map(str, files))} is its example's code")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
