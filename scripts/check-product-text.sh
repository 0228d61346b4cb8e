#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Product text says what it means: no mention of the design notes the project started from ("the seed") or their
# section numbers (§16 ...) in what users read: README.md, docs/, tools/ (help and messages), examples/ and every
# public include/ folder. Lists each hit and fails if there is one. CTest `product_text` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t places < <(ls -d README.md docs tools examples */include 2>/dev/null)
if hits=$(grep -rniE "seed|§[0-9]" "${places[@]}"); then
  echo "$hits"
  echo "check-product-text: $(wc -l <<<"$hits") lines cite the seed or a § number: say what is meant instead" >&2
  exit 1
fi
echo "check-product-text: no citation of the seed in ${places[*]}"
