#!/bin/sh
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Doxygen's input filter for the C ABI header (docs/Doxyfile, FILTER_PATTERNS): cuasync.h is plain C with plain
# `/* */` comments, which C compilers and readers of the header want as they are; Doxygen reads a comment before a
# declaration as `/** */` and one after a field or enum value as `/**< */`, and the file's opening comment as the
# file's description. Line for line (warnings keep their line numbers); the `/* ---- section ---- */` rulers stay
# plain. Usage: scripts/doxygen-c-filter.sh FILE (writes the filtered text to standard output).
exec sed -E \
  -e '0,/^ \*\/$/s// * @file cuasync.h *\//' \
  -e '/^\/\* -{2,}/b' \
  -e 's#^(\s*)/\* #\1/** #' \
  -e 's#^(.*[^[:space:]].*[;,{]\s*)/\* #\1/**< #' \
  -e 's#^(\s*[A-Z_0-9]+ = [0-9]+\s*)/\* #\1/**< #' \
  "$1"
