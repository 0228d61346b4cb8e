// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The jit tests that need nvJitLink skip only where it is truly absent (the loader says it is not found; a library
// that loads but fails is the test's failure), and the executable says how many skipped and why when it ends.
#include <cuasync/jit/nvjitlink.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

namespace cuasync::test {

struct skipped_without_nvjitlink {
  int count = 0;
  std::string why;
  ~skipped_without_nvjitlink() {
    if (count) std::printf("nvjitlink: %d test case(s) not run: %s\n", count, why.c_str());
  }
};
inline skipped_without_nvjitlink skipped_for_nvjitlink;

//! True when nvJitLink loads; otherwise the case is counted as skipped, with the loader's reason.
inline bool nvjitlink_or_skip() {
  try {
    jit::nvjitlink_library();
    return true;
  } catch (const jit::nvjitlink_not_found_error& e) {
    ++skipped_for_nvjitlink.count;
    skipped_for_nvjitlink.why = e.cause();
    WARN("skipped: nvJitLink is not installed here: " << e.cause());
    return false;
  }
}

}  // namespace cuasync::test
