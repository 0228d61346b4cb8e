#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Lists every tracked source file (C, C++, CUDA, Python, shell, CMake, linker scripts, sanitizer lists) whose first
# lines carry no SPDX-License-Identifier, and fails if there is one. CTest `spdx_lines` runs it.
# Usage: scripts/check-spdx.sh [--add]   (--add writes the line into the files that lack it)
set -euo pipefail
cd "$(dirname "$0")/.."
spdx="SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception"
add=${1:-}
missing=0
comment_for() {
  case "$1" in
    *.c | *.h | *.cpp | *.hpp | *.cu | *.cuh | *.map) echo "//" ;;
    *.py | *.pyi | *.sh | *.cmake | *.in | *CMakeLists.txt | *.supp | *.toml | .ci/run | *.gitignore | *.cfg | Doxyfile) echo "#" ;;
    *) echo "" ;;
  esac
}
while IFS= read -r f; do
  [ -f "$f" ] || continue
  c=$(comment_for "$f")
  [ -n "$c" ] || continue
  case "$f" in fuzz/corpus/*) continue ;; esac
  head -n 3 "$f" | grep -q "SPDX-License-Identifier" && continue
  if [ "$add" = --add ]; then
    [ "$c" = "//" ] && [ "${f##*.}" = map ] && c="/*" 
    line="$c $spdx"
    [ "$c" = "/*" ] && line="/* $spdx */"
    if head -n 1 "$f" | grep -q '^#!'; then
      { head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } > "$f.spdx.tmp"
    else
      { echo "$line"; cat "$f"; } > "$f.spdx.tmp"
    fi
    chmod --reference="$f" "$f.spdx.tmp"; mv "$f.spdx.tmp" "$f"
  else
    echo "no SPDX line: $f"; missing=$((missing + 1))
  fi
done < <(git ls-files --cached --others --exclude-standard)
if [ "$add" != --add ]; then
  if [ "$missing" -gt 0 ]; then echo "check-spdx: $missing source files have no SPDX line" >&2; exit 1; fi
  echo "check-spdx: every source file has an SPDX line"
fi
