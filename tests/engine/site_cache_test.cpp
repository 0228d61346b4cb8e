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
  const long n = test::simulated_calls_here(entry);
  REQUIRE(n >= 0);
  return n;
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
  // Streams cuasync created know their ids: no call per operation.
  CHECK(calls_here("cuStreamGetId") == stream_ids_before);
  // A bare handle (a framework's stream) is asked each time: the id tells a reused handle apart.
  for (int r = 0; r < 3; ++r)
    for (stream& s : streams) {
      admission_ticket t = source.try_admit(stream_ref(s.get(), s.context()));
      REQUIRE(t);
    }
  CHECK(calls_here("cuStreamGetId") - stream_ids_before == 3 * n);
}

TEST_CASE("a stream's known id is its own; the handle's stream now is asked of the driver", "[.simulated][engine]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  stream first = stream::create(ctx);
  const unsigned long long id = first.ask_id();
  const long before = calls_here("cuStreamGetId");
  CHECK(first.id() == id);
  const stream_ref copied = first;  // a reference made from the stream knows it too
  CHECK(copied.id() == id);
  CHECK(calls_here("cuStreamGetId") == before);
  const stream_ref adopted = stream_ref::adopt(first.get());  // asked once, at the adoption
  CHECK(calls_here("cuStreamGetId") == before + 1);
  CHECK(adopted.id() == id);
  CHECK(stream_ref(first.get(), ctx).id() == id);  // a bare handle: asked
  CHECK(calls_here("cuStreamGetId") == before + 2);
  stream moved = std::move(first);
  CHECK(moved.id() == id);
  CHECK(calls_here("cuStreamGetId") == before + 2);
  const CUstream handle = moved.get();
  moved = stream();  // destroyed
  CHECK(copied.id() == id);                   // what the reference was made for
  CHECK_THROWS_AS(copied.ask_id(), cuda_error);  // the handle names no stream now
  // Streams created until one gets the old handle back (the driver reuses handles): the old reference's id is still
  // the old stream's, the driver's answer for the handle is the new one's.
  std::vector<stream> later;
  for (int i = 0; i < 64 && (later.empty() || later.back().get() != handle); ++i) later.push_back(stream::create(ctx));
  if (later.back().get() == handle) {
    CHECK(later.back().id() != id);
    CHECK(copied.id() == id);
    CHECK(copied.ask_id() == later.back().id());
  }
}
