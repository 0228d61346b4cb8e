// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The NCCL loader and its errors, without a GPU: what CI can check of collectives/.
#include <cuasync/collectives/communicator.hpp>
#include <cuasync/collectives/detail/nccl_api.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include <unistd.h>

using namespace cuasync;
using namespace cuasync::collectives;

namespace {

// Sets CUASYNC_LIBNCCL (or unsets it: nullopt) for one scope.
class libnccl_variable {
 public:
  explicit libnccl_variable(std::optional<std::string> value) {
    if (const char* old = std::getenv("CUASYNC_LIBNCCL")) saved_ = old;
    if (value)
      ::setenv("CUASYNC_LIBNCCL", value->c_str(), 1);
    else
      ::unsetenv("CUASYNC_LIBNCCL");
  }
  ~libnccl_variable() {
    if (saved_)
      ::setenv("CUASYNC_LIBNCCL", saved_->c_str(), 1);
    else
      ::unsetenv("CUASYNC_LIBNCCL");
  }

 private:
  std::optional<std::string> saved_;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

TEST_CASE("CUASYNC_LIBNCCL naming a missing file is a typed error that names it", "[collectives][loader]") {
  libnccl_variable v(std::string("/nonexistent/dir/libnccl.so.2"));
  CHECK_THROWS_AS(collectives::detail::open_nccl(), nccl_not_found_error);
  try {
    collectives::detail::open_nccl();
  } catch (const nccl_not_found_error& e) {
    CHECK(e.code() == std::errc::no_such_file_or_directory);
  }
  const std::string what = message_of([] { collectives::detail::open_nccl(); });
  CHECK_THAT(what, Catch::Contains("/nonexistent/dir/libnccl.so.2"));
  CHECK_THAT(what, Catch::Contains("CUASYNC_LIBNCCL"));
}

TEST_CASE("CUASYNC_LIBNCCL naming a file that is not a library is refused", "[collectives][loader]") {
  const auto path = std::filesystem::temp_directory_path() / ("cuasync_not_a_library_" + std::to_string(::getpid()));
  std::ofstream(path) << "this is text, not an ELF file\n";
  libnccl_variable v(path.string());
  try {
    collectives::detail::open_nccl();
    FAIL("a text file was loaded as NCCL");
  } catch (const nccl_not_found_error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains(path.string()));
    CHECK(e.api() == "dlopen");
    CHECK(e.code() == std::errc::executable_format_error);  // there, but not a library: not "No such file"
  }
  std::filesystem::remove(path);
  // A directory.
  libnccl_variable d(std::filesystem::temp_directory_path().string());
  try {
    collectives::detail::open_nccl();
    FAIL("a directory was loaded as NCCL");
  } catch (const nccl_not_found_error& e) {
    CHECK(e.code() == std::errc::is_a_directory);
  }
}

TEST_CASE("a library without NCCL's entry points is refused, naming what it lacks", "[collectives][loader]") {
  const auto beside_us = std::filesystem::path(test::self_path()).parent_path() / CUASYNC_INCOMPLETE_NCCL;
  REQUIRE(std::filesystem::exists(beside_us));
  libnccl_variable v(beside_us.string());
  try {
    collectives::detail::open_nccl();
    FAIL("an incomplete library was accepted");
  } catch (const nccl_too_old_error& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("ncclAllReduce"));
    CHECK_THAT(what, Catch::Contains("ncclCommGetAsyncError"));
    CHECK_THAT(what, !Catch::Contains("ncclGetVersion"));  // it has that one
  }
}

TEST_CASE("without CUASYNC_LIBNCCL the loader finds NCCL or lists what it tried", "[collectives][loader]") {
  libnccl_variable v(std::nullopt);
  try {
    const auto n = collectives::detail::open_nccl();
    CHECK(n->version >= 20700);  // NCCL 2.7 or newer: every entry point resolved
    CHECK(n->library.find("libnccl") != std::string::npos);
    CHECK(n->all_reduce != nullptr);
    CHECK(n->comm_get_async_error != nullptr);
  } catch (const nccl_not_found_error& e) {
    CHECK_THAT(std::string(e.what()), Catch::Contains("libnccl.so.2"));
  }
}

TEST_CASE("NCCL results have their own error category", "[collectives][errors]") {
  const std::error_code remote = make_nccl_error_code(collectives::detail::nccl_remote_error);
  CHECK(std::string(remote.category().name()) == "nccl");
  CHECK_THAT(remote.message(), Catch::Contains("remote"));
  CHECK(remote != make_error_code(static_cast<CUresult>(collectives::detail::nccl_remote_error)));  // not a CUresult
  const cuda_error e(remote, "ncclAllReduce", "rank 1 of 2 on device 1");
  CHECK_THAT(std::string(e.what()), Catch::Contains("ncclAllReduce"));
  CHECK_THAT(std::string(e.what()), Catch::Contains("rank 1 of 2 on device 1"));
}

TEST_CASE("NVLink multicast is turned off unless the environment says otherwise", "[collectives][loader]") {
  std::optional<std::string> saved;
  if (const char* old = std::getenv("NCCL_NVLS_ENABLE")) saved = old;
  ::unsetenv("NCCL_NVLS_ENABLE");
  collectives::detail::default_nvls_off();
  REQUIRE(std::getenv("NCCL_NVLS_ENABLE") != nullptr);
  CHECK(std::string(std::getenv("NCCL_NVLS_ENABLE")) == "0");
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);
  collectives::detail::default_nvls_off();
  CHECK(std::string(std::getenv("NCCL_NVLS_ENABLE")) == "1");  // the user's choice stands
  if (saved)
    ::setenv("NCCL_NVLS_ENABLE", saved->c_str(), 1);
  else
    ::unsetenv("NCCL_NVLS_ENABLE");
}
