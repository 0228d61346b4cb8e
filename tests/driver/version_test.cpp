// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuasync/version.hpp: the macros agree with each other and with the library's cuasync::version().
#include <catch2/catch.hpp>

#include <cuasync/version.hpp>

#include <string>

TEST_CASE("the library's version is the headers' and the macros agree", "[driver][version]") {
  const cuasync::version_info v = cuasync::version();
  CHECK(v.major == CUASYNC_VERSION_MAJOR);
  CHECK(v.minor == CUASYNC_VERSION_MINOR);
  CHECK(v.patch == CUASYNC_VERSION_PATCH);
  CHECK(std::string(v.text) == CUASYNC_VERSION_STRING);
  CHECK(std::string(CUASYNC_VERSION_STRING) == std::to_string(CUASYNC_VERSION_MAJOR) + "." +
                                                   std::to_string(CUASYNC_VERSION_MINOR) + "." +
                                                   std::to_string(CUASYNC_VERSION_PATCH));
  CHECK(CUASYNC_VERSION == CUASYNC_VERSION_MAJOR * 10000 + CUASYNC_VERSION_MINOR * 100 + CUASYNC_VERSION_PATCH);
}
