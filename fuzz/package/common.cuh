// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#define SCALE 2.0f
