// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// NVRTC loaded at run time: version, architectures, the error category, and the typed error when it is missing
// (in a child process: the loader runs once per process).
#include <cuasync/jit/nvrtc.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "nvjitlink_skip.hpp"
#include "scratch.hpp"

#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

using namespace cuasync;

// Run by the test below in a child process.
TEST_CASE("nvrtc probe", "[.nvrtc_probe]") {
  CUASYNC_CHILD_ONLY();
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

namespace {

// The dynamic loader this executable runs under (its PT_INTERP), to start a child that ignores /etc/ld.so.cache
// (`ld.so --inhibit-cache`): then the system's NVRTC, a toolkit folder listed only in the cache, is not found by
// name, as on a machine whose NVRTC came from pip. Empty when there is none.
std::string program_interpreter() {
  std::string found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_INTERP)
            *static_cast<std::string*>(out) = reinterpret_cast<const char*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
        return 1;  // the first object is the executable
      },
      &found);
  return found;
}

// A folder laid out as pip's nvidia-cuda-nvrtc wheel leaves it, <root>/nvidia/cu13/lib/libnvrtc.so.13, the library
// being a link to the NVRTC this process loaded.
std::filesystem::path fake_wheel_nvrtc_dir(const std::filesystem::path& root) {
  const auto dir = root / "nvidia" / "cu13" / "lib";
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(std::filesystem::canonical(jit::nvrtc_library().library), dir / "libnvrtc.so.13");
  return dir;
}

}  // namespace

TEST_CASE("NVRTC is found in $CUASYNC_NVRTC_SEARCH_PATH after the system's, as pip's wheel installs it",
          "[jit][nvrtc]") {
  if (std::getenv("CUASYNC_LIBNVRTC") || std::getenv("CUASYNC_NVRTC_SEARCH_PATH")) {
    WARN("CUASYNC_LIBNVRTC or CUASYNC_NVRTC_SEARCH_PATH is set in this environment: the search path is not tested");
    return;
  }
  const std::string interpreter = program_interpreter();
  REQUIRE(!interpreter.empty());
  test::scratch_dir scratch;
  const auto dir = fake_wheel_nvrtc_dir(scratch.path);
  const std::string search = "CUASYNC_NVRTC_SEARCH_PATH=" + (scratch.path / "empty").string() + "::" + dir.string();
  const std::string self = test::self_path();

  SECTION("no system NVRTC: the search path's is loaded") {
    auto r = test::run_child({"--inhibit-cache", self, "nvrtc probe", "--success"}, {search},
                             std::chrono::seconds(60), interpreter);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("PROBE loaded NVRTC " + jit::nvrtc_library().version_string() + " from " +
                                         (dir / "libnvrtc.so.13").string()));
  }
  SECTION("no system NVRTC and none in the search path: the error names the folders tried and the variable") {
    const std::string none = "CUASYNC_NVRTC_SEARCH_PATH=" + (scratch.path / "empty").string();
    auto r = test::run_child({"--inhibit-cache", self, "nvrtc probe", "--success"}, {none},
                             std::chrono::seconds(60), interpreter);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("PROBE nvrtc_not_found_error"));
    CHECK_THAT(r.output, Catch::Contains((scratch.path / "empty" / "libnvrtc.so.13").string()));
    CHECK_THAT(r.output, Catch::Contains((scratch.path / "empty" / "libnvrtc.so.12").string()));
    CHECK_THAT(r.output, Catch::Contains("CUASYNC_NVRTC_SEARCH_PATH"));
  }
  SECTION("the system's NVRTC comes first") {
    auto r = test::run_child({"nvrtc probe", "--success"}, {search});
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("PROBE loaded NVRTC"));
    CHECK_THAT(r.output, !Catch::Contains(dir.string()));
  }
}

TEST_CASE("nvJitLink is found in $CUASYNC_NVRTC_SEARCH_PATH after the system's, as pip's wheel installs it",
          "[jit][link]") {
  if (!test::nvjitlink_or_skip()) return;
  if (std::getenv("CUASYNC_LIBNVJITLINK") || std::getenv("CUASYNC_NVRTC_SEARCH_PATH")) {
    WARN("CUASYNC_LIBNVJITLINK or CUASYNC_NVRTC_SEARCH_PATH is set in this environment: the search path is not "
         "tested");
    return;
  }
  const std::string interpreter = program_interpreter();
  REQUIRE(!interpreter.empty());
  test::scratch_dir scratch;
  const auto dir = scratch.path / "nvidia" / "cu13" / "lib";
  std::filesystem::create_directories(dir);
  std::filesystem::create_symlink(std::filesystem::canonical(jit::nvjitlink_library().library),
                                  dir / "libnvJitLink.so.13");
  const std::string search = "CUASYNC_NVRTC_SEARCH_PATH=" + (scratch.path / "empty").string() + "::" + dir.string();
  const std::string self = test::self_path();
  SECTION("no system nvJitLink: the search path's is loaded") {
    auto r = test::run_child({"--inhibit-cache", self, "nvjitlink probe", "--success"}, {search},
                             std::chrono::seconds(60), interpreter);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("PROBE loaded nvJitLink " + jit::nvjitlink_library().version_string() +
                                         " from " + (dir / "libnvJitLink.so.13").string()));
  }
  SECTION("none anywhere: the error names the folders tried and the variables") {
    const std::string none = "CUASYNC_NVRTC_SEARCH_PATH=" + (scratch.path / "empty").string();
    auto r = test::run_child({"--inhibit-cache", self, "nvjitlink probe", "--success"}, {none},
                             std::chrono::seconds(60), interpreter);
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("PROBE nvjitlink_not_found_error"));
    CHECK_THAT(r.output, Catch::Contains((scratch.path / "empty" / "libnvJitLink.so.13").string()));
    CHECK_THAT(r.output, Catch::Contains("CUASYNC_NVRTC_SEARCH_PATH") && Catch::Contains("CUASYNC_LIBNVJITLINK"));
  }
  SECTION("the system's nvJitLink comes first") {
    auto r = test::run_child({"nvjitlink probe", "--success"}, {search});
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("PROBE loaded nvJitLink"));
    CHECK_THAT(r.output, !Catch::Contains(dir.string()));
  }
}
