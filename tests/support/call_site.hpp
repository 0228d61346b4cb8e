// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Checks that an error names the test's call site, not a line inside cuasync: write the throwing call and the check
// on one line, `check_call_site(error_of([&] { stream::create(context_ref{}); }));`.
#include <cuasync/driver/error.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <source_location>
#include <stdexcept>
#include <string>
#include <utility>

namespace cuasync::test {

//! The `cuda_error` that `f()` throws; fails the test when it throws none.
template <class F>
cuda_error error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const cuda_error& e) {
    return e;
  }
  FAIL("no cuda_error was thrown");
  throw std::logic_error("unreachable");
}

//! `e.where()` is this check's file and line (those of the call on the same line), and `e.what()` names them.
inline void check_call_site(const cuda_error& e, std::source_location here = std::source_location::current()) {
  const char* file = std::strrchr(here.file_name(), '/');
  const std::string site = std::string(file ? file + 1 : here.file_name()) + ":" + std::to_string(here.line()) + " ";
  INFO("the call at line " << here.line() << " threw: " << e.what());
  CHECK(std::string(e.where().file_name()) == here.file_name());
  CHECK(e.where().line() == here.line());
  CHECK_THAT(e.what(), Catch::Contains(" at " + site + "in "));
}

}  // namespace cuasync::test
