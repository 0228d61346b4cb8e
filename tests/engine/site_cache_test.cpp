// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// try_admit by stream (cuda_completion_source::site_of) keeps the streams' event pools per thread, so an operation
// pays no registry lock and no cuCtxGetId for its site. A loop over 64 streams in turn (the bench's awaited
// throughput at 64 streams) must hit that cache too: 8 entries replaced in turn missed on every operation.
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>

#include <catch2/catch.hpp>

#include "simulated_driver.hpp"

#include <vector>

using namespace cuasync;

namespace {
long calls_here(const char* entry) {
  auto* calls =
      reinterpret_cast<long (*)(const char*)>(test::simulated_driver_symbol("fake_cuda_calls_on_this_thread"));
  REQUIRE(calls);
  return calls(entry);
}
}  // namespace

TEST_CASE("admission over 64 streams in turn finds each stream's site without asking the context's id",
          "[.simulated][engine]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  constexpr int n = 64;
  std::vector<stream> streams;
  for (int i = 0; i < n; ++i) streams.push_back(stream::create(ctx));
  auto& source = cuda_completion_source::instance();
  auto round = [&] {
    for (stream& s : streams) {
      admission_ticket t = source.try_admit(s);
      REQUIRE(t);
    }  // each ticket gives its place back at once
  };
  round();  // the first look-up of each stream asks the registry
  const long ids_before = calls_here("cuCtxGetId");
  const long stream_ids_before = calls_here("cuStreamGetId");
  for (int r = 0; r < 3; ++r) round();
  CHECK(calls_here("cuCtxGetId") == ids_before);
  CHECK(calls_here("cuStreamGetId") - stream_ids_before == 3 * n);  // the id stays: it tells a reused handle apart
}
