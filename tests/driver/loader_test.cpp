// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The loader's typed errors, each in a fresh child process (the loader runs once per process).
#include <catch2/catch.hpp>

#include "child_process.hpp"

#include <cuasync/driver/device.hpp>
#include <cuasync/driver/detail/driver_api.hpp>

#include <cstdio>
#include <filesystem>
#include <source_location>
#include <string>
#include <typeinfo>

namespace {

std::string build_dir() { return std::filesystem::path(cuasync::test::self_path()).parent_path().string(); }

cuasync::test::child_result probe(std::vector<std::string> env) {
  return cuasync::test::run_child({"loader probe", "--success"}, std::move(env), std::chrono::seconds(60));
}

}  // namespace

// Run by the tests below in a child process: loads the driver and prints what happened.
TEST_CASE("loader probe", "[.loader_probe]") {
  CUASYNC_CHILD_ONLY();
  try {
    cuasync::detail::driver();
    std::printf("PROBE loaded %d devices\n", cuasync::device::count());
  } catch (const cuasync::stub_library_error& e) {
    std::printf("PROBE stub_library_error: %s\n", e.what());
  } catch (const cuasync::no_device_error& e) {
    std::printf("PROBE no_device_error: %s\n", e.what());
  } catch (const cuasync::driver_too_old_error& e) {
    std::printf("PROBE driver_too_old_error: %s\n", e.what());
  } catch (const cuasync::driver_not_found_error& e) {
    std::printf("PROBE driver_not_found_error: %s\n", e.what());
  } catch (const cuasync::cuda_error& e) {
    std::printf("PROBE cuda_error: %s\n", e.what());
  }
  SUCCEED();
}

TEST_CASE("a missing driver library is a driver_not_found_error that names the library", "[driver][loader]") {
  auto r = probe({"CUASYNC_LIBCUDA=/nonexistent/libcuda.so.1"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE driver_not_found_error"));
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/libcuda.so.1"));
  CHECK_THAT(r.output, Catch::Contains("CUASYNC_LIBCUDA"));
}

TEST_CASE("the toolkit's stub library is a stub_library_error", "[driver][loader]") {
  std::string stub = CUASYNC_CUDA_STUB_LIBCUDA;
  std::vector<std::string> env;
  if (std::filesystem::exists(stub)) {
    env = {"CUASYNC_LIBCUDA=" + stub};
  } else {
    env = {"CUASYNC_LIBCUDA=" + build_dir() + "/" + CUASYNC_FAKE_LIBCUDA_NAME, "FAKE_CUDA_MODE=stub"};
  }
  auto r = probe(env);
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE stub_library_error"));
  CHECK_THAT(r.output, Catch::Contains("CUDA_ERROR_STUB_LIBRARY"));
}

TEST_CASE("a driver without devices is a no_device_error", "[driver][loader]") {
  auto r = probe({"CUASYNC_LIBCUDA=" + build_dir() + "/" + CUASYNC_FAKE_LIBCUDA_NAME, "FAKE_CUDA_MODE=no_device"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE no_device_error"));
  CHECK_THAT(r.output, Catch::Contains("no CUDA device"));
}

TEST_CASE("a driver older than an entry point is a driver_too_old_error naming the entry point", "[driver][loader]") {
  auto r = probe({"CUASYNC_LIBCUDA=" + build_dir() + "/" + CUASYNC_FAKE_LIBCUDA_NAME, "FAKE_CUDA_MODE=too_old"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE driver_too_old_error"));
  CHECK_THAT(r.output, Catch::Contains("CUDA 11.8"));
  CHECK_THAT(r.output, Catch::Contains("lacks the entry point"));
}

TEST_CASE("the real driver loads", "[driver][loader][gpu]") {
  auto r = probe({});
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("PROBE loaded"));
}

// Run by the test below in a child process: the first driver use is device::count(), twice (the load, then the
// remembered failure); prints whether the error names this file's line.
TEST_CASE("loader call site probe", "[.loader_call_site_probe]") {
  CUASYNC_CHILD_ONLY();
  for (int i = 0; i < 2; ++i) {
    const std::source_location here = std::source_location::current();
    try {
      (void)cuasync::device::count();  // on the line after `here`
      std::printf("PROBE loaded\n");
    } catch (const cuasync::driver_not_found_error& e) {
      const bool caller = std::string(e.where().file_name()) == here.file_name() && e.where().line() == here.line() + 2;
      std::printf("PROBE driver_not_found_error where=%s: %s\n", caller ? "caller" : "elsewhere", e.what());
    }
  }
  SUCCEED();
}

TEST_CASE("a loader error names the line of the call that first needed the driver", "[driver][loader]") {
  auto r = cuasync::test::run_child({"loader call site probe"}, {"CUASYNC_LIBCUDA=/nonexistent/libcuda.so.1"},
                                    std::chrono::seconds(60));
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string caller = "PROBE driver_not_found_error where=caller";
  const std::size_t first = r.output.find(caller);
  REQUIRE(first != std::string::npos);
  CHECK(r.output.find(caller, first + 1) != std::string::npos);  // the remembered failure too
  CHECK_THAT(r.output, Catch::Contains(" at loader_test.cpp:"));
}
