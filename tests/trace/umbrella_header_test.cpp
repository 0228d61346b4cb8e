// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The umbrella header compiles on its own and brings the whole layer (each header is first in its own test file).
#include <cuasync/trace.hpp>

#include <catch2/catch.hpp>

TEST_CASE("the umbrella header declares the recorder, the exporters and the summary", "[trace]") {
  CHECK_FALSE(cuasync::trace::enabled());
  CHECK(cuasync::trace::to_chrome_json(cuasync::trace::timeline{}).find("traceEvents") != std::string::npos);
  CHECK(cuasync::trace::summarize(cuasync::trace::timeline{}).critical == cuasync::trace::stage::none);
}
