// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The host diagnostics on hand-made timelines: device-wide synchronization, a host wait followed by more GPU work,
// and synchronous allocations between launches.
#include <cuasync/trace/diagnostics.hpp>

#include "span_builder.hpp"

#include <catch2/catch.hpp>

namespace trace = cuasync::trace;
using trace::category;
using trace::diagnostic;
using trace::test::find_kind;
using trace::test::names;
using trace::test::span_builder;

namespace {
// A launch on `stream` issued by thread 1 at `at` (5 us) and run on the GPU from `at + 10` for 100 us.
void launch(span_builder& b, std::uint64_t stream, const char* name, std::int64_t at) {
  b.issue(1, category::launch, stream, name, at, at + 5);
  b.kernel(stream, name, at + 10, at + 110);
}
}  // namespace

TEST_CASE("device_synchronize fires on a context synchronize between GPU work", "[trace][diagnostics]") {
  span_builder b;
  launch(b, 1, "first", 0);
  b.host(1, category::sync, "cuCtxSynchronize", 10, 115, trace::flag::device_wide).label = "step 1";
  launch(b, 1, "second", 120);
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::device_synchronize);
  REQUIRE(f);
  CHECK(f->occurrences == 1);
  CHECK(names(*f, "cuCtxSynchronize on thread 1 at 10.000 µs, 105.000 µs long, label \"step 1\""));
  CHECK(f->fix.find("stream_ref::wait(event)") != std::string::npos);
}

TEST_CASE("device_synchronize is silent on a final synchronize and on stream synchronizes", "[trace][diagnostics]") {
  span_builder b;
  launch(b, 1, "first", 0);
  launch(b, 1, "second", 20);
  b.host(1, category::sync, "cuCtxSynchronize", 30, 140, trace::flag::device_wide);  // teardown: nothing after it
  b.host(1, category::sync, "cuStreamSynchronize", 10, 12, trace::flag::host_wait);
  CHECK_FALSE(find_kind(b.diagnose(), diagnostic::device_synchronize));
}

TEST_CASE("host_wait fires on a stream synchronize followed at once by a launch", "[trace][diagnostics]") {
  span_builder b;
  launch(b, 1, "producer", 0);
  trace::span& w = b.host(1, category::sync, "cuStreamSynchronize", 6, 112, trace::flag::host_wait);
  w.stream_id = 1;
  launch(b, 2, "consumer", 115);
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::host_wait);
  REQUIRE(f);
  CHECK(f->occurrences == 1);
  CHECK(names(*f, "cuStreamSynchronize on thread 1"));
  CHECK(names(*f, "3.000 µs later: consumer on thread 1 (stream 2)"));
  CHECK(f->summary.find("very stream") == std::string::npos);  // another stream: cuStreamWaitEvent would do
  CHECK(f->fix.find("async_wait") != std::string::npos);

  SECTION("the next launch on the very stream waited for is named as such") {
    b.t.spans.back().lane = trace::lane::stream(0, 1);
    b.t.spans[b.t.spans.size() - 2].stream_id = 1;
    const auto again = b.diagnose();
    const trace::finding* g = find_kind(again, diagnostic::host_wait);
    REQUIRE(g);
    CHECK(g->summary.find("1 issued on the very stream waited for") != std::string::npos);
  }
}

TEST_CASE("host_wait is silent when the host worked between the wait and the next launch", "[trace][diagnostics]") {
  auto fires = [](std::int64_t next_at, bool host_work_between) {
    span_builder b;
    launch(b, 1, "producer", 0);
    b.host(1, category::sync, "cuEventSynchronize", 6, 112, trace::flag::host_wait);
    if (host_work_between) b.host(1, category::user, "read results", 113, 114);
    launch(b, 2, "consumer", next_at);
    return find_kind(b.diagnose(), diagnostic::host_wait) != nullptr;
  };
  CHECK(fires(115, false));         // the provoking case
  CHECK_FALSE(fires(115, true));    // the host used the result
  CHECK_FALSE(fires(2'000, false)); // 1.9 ms later: untraced host work, not a plain hand-over
  span_builder event_wait;          // the clean program: a device-side wait, no host wait at all
  launch(event_wait, 1, "producer", 0);
  launch(event_wait, 2, "consumer", 10);
  CHECK(event_wait.diagnose().empty());
}

TEST_CASE("allocation_on_hot_path fires on synchronous allocations between launches", "[trace][diagnostics]") {
  span_builder b;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t at = i * 1'000;
    b.host(1, category::alloc, "cuMemAlloc", at + 200, at + 260).bytes = 1 << 20;
    launch(b, 1, "step", at + 300);
    b.host(1, category::alloc, "cuMemFree", at + 500, at + 600);
  }
  const auto fs = b.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::allocation_on_hot_path);
  REQUIRE(f);
  CHECK(f->occurrences == 4);  // the first allocation came before the first launch, the last free after the last
  CHECK(names(*f, "(cuMemAlloc x2, cuMemFree x2)"));
  CHECK(names(*f, "cuMemAlloc on thread 1 at 1.200 ms"));
  CHECK(f->fix.find("rt->pinned()->allocate") != std::string::npos);
}

TEST_CASE("allocation_on_hot_path is silent on allocations of a thread that issues no GPU work",
          "[trace][diagnostics]") {
  // cuasync's background grower (or any helper thread) allocating pinned memory while thread 1 launches: the thread
  // that issues work never waits for it. The same allocations on thread 1 fire.
  span_builder background, inline_;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t at = i * 1'000;
    launch(background, 1, "step", at + 100);
    background.host(2, category::alloc, "cuMemHostAlloc", at + 300, at + 900);
    launch(inline_, 1, "step", at + 100);
    inline_.host(1, category::alloc, "cuMemHostAlloc", at + 300, at + 900);
  }
  CHECK_FALSE(find_kind(background.diagnose(), diagnostic::allocation_on_hot_path));
  const auto fs = inline_.diagnose();
  const trace::finding* f = find_kind(fs, diagnostic::allocation_on_hot_path);
  REQUIRE(f);
  CHECK(f->occurrences == 2);  // the third came after the last launch
}

TEST_CASE("allocation_on_hot_path is silent on pools and on allocations around the work", "[trace][diagnostics]") {
  span_builder pools;
  for (int i = 0; i < 3; ++i) {
    const std::int64_t at = i * 1'000;
    pools.host(1, category::alloc, "cuMemAllocFromPoolAsync", at + 200, at + 201, trace::flag::stream_ordered);
    launch(pools, 1, "step", at + 300);
    pools.host(1, category::alloc, "cuMemFreeAsync", at + 500, at + 501, trace::flag::stream_ordered);
  }
  CHECK_FALSE(find_kind(pools.diagnose(), diagnostic::allocation_on_hot_path));

  span_builder around;
  around.host(1, category::alloc, "cuMemHostAlloc", 0, 900);
  around.host(1, category::alloc, "cuMemAlloc", 900, 950);
  for (int i = 0; i < 3; ++i) launch(around, 1, "step", 1'000 + i * 200);
  around.host(1, category::alloc, "cuMemFree", 2'000, 2'100);
  around.host(1, category::alloc, "cuMemFreeHost", 2'100, 2'200);
  CHECK_FALSE(find_kind(around.diagnose(), diagnostic::allocation_on_hot_path));

  span_builder one;  // a single allocation between launches: a warm-up, not a hot path
  launch(one, 1, "step", 0);
  one.host(1, category::alloc, "cuMemHostAlloc", 200, 300);
  launch(one, 1, "step", 400);
  CHECK_FALSE(find_kind(one.diagnose(), diagnostic::allocation_on_hot_path));
}
