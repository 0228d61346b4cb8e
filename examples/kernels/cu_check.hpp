// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The raw examples' error check: what every hand-written driver program repeats around each call (cuasync's layers
// turn it into a cuda_error naming the call, the object and the call site).
#include <cstdio>
#include <cstdlib>

#define CU_CHECK(call)                                                                      \
  do {                                                                                      \
    if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                                         \
      std::fprintf(stderr, "%s failed: %d at %s:%d\n", #call, int(r_), __FILE__, __LINE__); \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)
