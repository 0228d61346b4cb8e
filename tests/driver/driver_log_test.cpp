// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/driver_log.hpp>

#include <catch2/catch.hpp>

#include <cuasync/driver.hpp>
#include <cuasync/driver/detail/driver_api.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <algorithm>
#include <string>
#include <thread>

using namespace cuasync;
using Catch::Matchers::Contains;

namespace {
cuda_error error_of(auto&& f) {
  try {
    f();
  } catch (const cuda_error& e) {
    return e;
  }
  FAIL("no cuda_error was thrown");
  throw;
}
bool recent_has(const std::string& text) {
  const auto lines = driver_log::recent();
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != l.npos; });
}
}  // namespace

// The simulated driver logs an allocation past its 1 GiB of device memory as a 12.9+ driver would.
TEST_CASE("a failed call's error carries the driver's log line of that call", "[.simulated][driver][driver_log]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  REQUIRE(driver_log::available());
  const cuda_error e = error_of([&] { (void)device_buffer::allocate(ctx, std::size_t{3} << 30); });
  CHECK(e.result() == CUDA_ERROR_OUT_OF_MEMORY);
  CHECK_THAT(e.driver_log(), Contains("[cuMemAlloc_v2] cannot allocate 3221225472 bytes"));
  CHECK_THAT(e.what(), Contains("; the driver says: [") && Contains("cannot allocate 3221225472 bytes"));
  CHECK_THAT(e.cause(), Contains("the driver says:"));
  CHECK(recent_has("cannot allocate 3221225472 bytes"));

  SECTION("a line is carried once: the next error of the same call has only its own") {
    const cuda_error again = error_of([&] { (void)device_buffer::allocate(ctx, std::size_t{5} << 30); });
    CHECK_THAT(again.driver_log(), Contains("cannot allocate 5368709120 bytes"));
    CHECK_THAT(again.driver_log(), !Contains("3221225472"));
  }
  SECTION("another thread's line stays out of this thread's error") {
    std::thread([&] {
      scoped_context current(ctx);
      CUdeviceptr p = 0;
      CHECK(detail::driver().cuMemAlloc(&p, std::size_t{7} << 30) == CUDA_ERROR_OUT_OF_MEMORY);  // logged, not thrown
    }).join();
    CHECK(recent_has("cannot allocate 7516192768 bytes"));
    const cuda_error mine = error_of([&] { (void)device_buffer::allocate(ctx, std::size_t{6} << 30); });
    CHECK_THAT(mine.driver_log(), Contains("6442450944") && !Contains("7516192768"));
  }
  SECTION("a line of another entry point stays out of this call's error") {
    scoped_context current(ctx);
    CUdeviceptr p = 0;
    REQUIRE(detail::driver().cuMemAlloc(&p, std::size_t{9} << 30) == CUDA_ERROR_OUT_OF_MEMORY);  // handled here
    const cuda_error other = error_of([] { detail::throw_cu(CUDA_ERROR_INVALID_HANDLE, "cuStreamQuery", "", {}); });
    CHECK(other.driver_log().empty());
    CHECK_THAT(other.what(), !Contains("the driver says"));
    // The line is still there for the call it names.
    const cuda_error named = error_of([] { detail::throw_cu(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc", "", {}); });
    CHECK_THAT(named.driver_log(), Contains("9663676416"));
  }
}

TEST_CASE("errors without a line of the driver's say nothing of it", "[driver][driver_log]") {
  const cuda_error e(make_error_code(CUDA_ERROR_INVALID_VALUE), "cuasync::test", "nothing logged");
  CHECK(e.driver_log().empty());
  CHECK_THAT(e.what(), !Contains("the driver says"));
  const cuda_error with(make_error_code(CUDA_ERROR_INVALID_VALUE), "cuMemAlloc", "", "[cuMemAlloc_v2] too big",
                        std::source_location::current());
  CHECK(with.driver_log() == "[cuMemAlloc_v2] too big");
  CHECK_THAT(with.cause(), Contains("cuMemAlloc: CUDA_ERROR_INVALID_VALUE") &&
                               Contains("the driver says: [cuMemAlloc_v2] too big"));
}

// On a real driver for CUDA 12.9+: which calls the driver explains is its choice, so several plainly wrong calls are
// made and at least one must come back with text (each is printed for the record).
TEST_CASE("a driver call that fails on purpose carries the driver's text", "[driver][driver_log][gpu][api_error]") {
  const auto& d = detail::driver();
  if (!driver_log::available()) {
    WARN("the driver (CUDA " << d.driver_version << ") gives no log: nothing to check (needs 12.9+)");
    CHECK(d.driver_version < 12090);
    return;
  }
  scoped_context current(test::ctx());
  std::string carried;
  auto attempt = [&](const char* api, CUresult r) {
    if (r == CUDA_SUCCESS) return;
    const cuda_error e = error_of([&] { detail::throw_cu(r, api, "on purpose", {}); });
    UNSCOPED_INFO(api << ": " << e.cause());
    if (!e.driver_log().empty()) carried += std::string(api) + ": " + e.driver_log() + "\n";
  };
  CUdeviceptr p = 0;
  attempt("cuMemAlloc", d.cuMemAlloc(&p, std::size_t{1} << 52));  // 4 PiB
  attempt("cuMemFree", d.cuMemFree(CUdeviceptr{0x10}));  // not an allocation
  CUfunction f = nullptr;
  attempt("cuModuleGetFunction", d.cuModuleGetFunction(&f, test::kernels().get(), "no_such_kernel"));
  attempt("cuFuncSetAttribute", d.cuFuncSetAttribute(test::kernels().kernel("add_value").get(),
                                                     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 20));
  std::string recent;
  for (const std::string& line : driver_log::recent()) recent += line + "\n";
  WARN("driver log lines carried:\n" << carried << "the driver's recent lines:\n" << recent);
  CHECK_FALSE(carried.empty());
}
