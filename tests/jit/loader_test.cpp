// NVRTC loaded at run time: version, architectures, the error category, and the typed error when it is missing
// (in a child process: the loader runs once per process).
#include <cuasync/jit/nvrtc.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"

#include <cstdio>
#include <filesystem>

using namespace cuasync;

// Run by the test below in a child process.
TEST_CASE("nvrtc probe", "[.nvrtc_probe]") {
  try {
    const auto& info = jit::nvrtc_library();
    std::printf("PROBE loaded NVRTC %s from %s\n", info.version_string().c_str(), info.library.c_str());
  } catch (const jit::nvrtc_not_found_error& e) {
    std::printf("PROBE nvrtc_not_found_error: %s\n", e.what());
  }
  SUCCEED();
}

TEST_CASE("NVRTC reports its version and supported architectures", "[jit][nvrtc]") {
  const auto& info = jit::nvrtc_library();
  INFO("NVRTC " << info.version_string() << " from " << info.library);
  CHECK(info.major >= 12);
  CHECK(info.version() == info.major * 1000 + info.minor * 10);
  REQUIRE(!info.supported_archs.empty());
  CHECK(std::is_sorted(info.supported_archs.begin(), info.supported_archs.end()));
  CHECK(info.supports(90));
  CHECK(!info.supports(91));
  CHECK(std::filesystem::exists(info.library));
}

TEST_CASE("the toolkit's include directories are found at run time", "[jit][nvrtc]") {
  const auto& dirs = jit::toolkit_include_dirs();
  REQUIRE(!dirs.empty());
  CHECK(std::filesystem::exists(std::filesystem::path(dirs[0]) / "cuda_fp16.h"));
  if (dirs.size() > 1) CHECK(std::filesystem::exists(std::filesystem::path(dirs[1]) / "cuda" / "std"));
}

TEST_CASE("a missing NVRTC is an nvrtc_not_found_error that names the library and CUASYNC_LIBNVRTC",
          "[jit][nvrtc]") {
  auto r = test::run_child({"nvrtc probe", "--success"}, {"CUASYNC_LIBNVRTC=/nonexistent/libnvrtc.so.13"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE nvrtc_not_found_error"));
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/libnvrtc.so.13"));
  CHECK_THAT(r.output, Catch::Contains("CUASYNC_LIBNVRTC"));
}

TEST_CASE("a library that is not NVRTC is refused, naming the missing entry point", "[jit][nvrtc]") {
  auto r = test::run_child({"nvrtc probe", "--success"}, {"CUASYNC_LIBNVRTC=libm.so.6"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE nvrtc_not_found_error"));
  CHECK_THAT(r.output, Catch::Contains("has no entry point nvrtcGetErrorString"));
}

TEST_CASE("nvrtcResult has its own error category", "[jit][nvrtc][error]") {
  const std::error_code ec = make_error_code(NVRTC_ERROR_COMPILATION);
  CHECK(ec.category() == nvrtc_category());
  CHECK(ec.category().name() == std::string("nvrtc"));
  CHECK_THAT(ec.message(), Catch::Contains("NVRTC_ERROR_COMPILATION"));
  CHECK(ec != make_error_code(CUDA_ERROR_INVALID_PTX));
  CHECK_THAT(make_error_code(static_cast<nvrtcResult>(9999)).message(), Catch::Contains("9999"));
}
