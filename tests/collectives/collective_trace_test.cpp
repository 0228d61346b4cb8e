// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Collectives on the timeline (collectives/src/collective_trace.hpp), on however many GPUs there are (one suffices):
// an NCCL call is a `collective` GPU span on its stream's lane plus an issue span on the calling thread's lane; a
// group's calls on one stream are one span that ends after the group's work, named after every call in it.
#include "collective_checks.hpp"

#include <cuasync/trace/recorder.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "trace_recording.hpp"

#include <numeric>

using namespace cuasync;
using namespace cuasync::collectives;

namespace {

std::vector<trace::span> spans_of(const trace::timeline& t, trace::category c, trace::lane_kind k) {
  std::vector<trace::span> out;
  for (const trace::span& s : t.spans)
    if (s.category == c && s.lane.kind == k) out.push_back(s);
  return out;
}

std::vector<int> all_devices() {
  std::vector<int> ids(static_cast<std::size_t>(device::count()));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

}  // namespace

TEST_CASE("a collective is a span on its stream's lane, timed on the GPU", "[collectives][trace][gpu]") {
  if (!test::devices_at_least(1)) return;
  auto comms = communicator::init_all(all_devices());
  auto ranks = test::local_ranks(comms);
  constexpr std::size_t bytes = 4 << 20;
  std::vector<device_buffer> bufs;
  for (auto& r : ranks) bufs.push_back(device_buffer::allocate(r.rt->context(), bytes));
  test::trace_recording rec;
  {
    group g;  // several ranks in one process: NCCL's rule; one rank: an ordinary group of one call
    for (std::size_t k = 0; k < ranks.size(); ++k)
      all_reduce(comms[k], bufs[k].span(), bufs[k].span(), data_type::float32, reduce_op::sum, ranks[k].s);
    g.end();
  }
  for (auto& r : ranks) r.s.synchronize();
  const trace::timeline t = trace::snapshot();
  const auto gpu = spans_of(t, trace::category::collective, trace::lane_kind::stream);
  REQUIRE(gpu.size() == ranks.size());
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const trace::span& s = gpu[k];
    INFO(s.name);
    CHECK(s.clock == trace::clock_source::gpu_events);
    CHECK(s.bytes == bytes);
    CHECK(s.end_ns > s.begin_ns);
    CHECK(s.name.find("ncclAllReduce (rank ") == 0);
  }
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const std::uint64_t id = ranks[k].s.id();
    const auto lane = trace::lane::stream(comms[k].device(), id);
    CHECK(std::count_if(gpu.begin(), gpu.end(), [&](const trace::span& s) { return s.lane == lane; }) == 1);
  }
  const auto issued = spans_of(t, trace::category::collective, trace::lane_kind::host_thread);
  CHECK(issued.size() == ranks.size());
}

TEST_CASE("a group's calls on one stream are one span; another stream's call its own", "[collectives][trace][gpu]") {
  if (!test::devices_at_least(1)) return;
  auto comms = communicator::init_all(std::vector<int>{0});
  auto rt = runtime::device_runtime::for_device(0);
  stream a = stream::create(rt->context());
  stream b = stream::create(rt->context());
  device_buffer x = device_buffer::allocate(rt->context(), 1 << 20);
  device_buffer y = device_buffer::allocate(rt->context(), 1 << 20);
  device_buffer z = device_buffer::allocate(rt->context(), 2 << 20);
  test::trace_recording rec;
  {
    group g;
    all_reduce(comms[0], x.span(), x.span(), data_type::float32, reduce_op::sum, a);
    broadcast(comms[0], y.span(), y.span(), data_type::float32, 0, a);
    all_gather(comms[0], z.span(), z.span(), data_type::int8, b);
    g.end();
  }
  a.synchronize();
  b.synchronize();
  const trace::timeline t = trace::snapshot();
  const auto gpu = spans_of(t, trace::category::collective, trace::lane_kind::stream);
  REQUIRE(gpu.size() == 2);
  const auto on = [&](const stream& s) {
    const auto lane = trace::lane::stream(0, s.id());
    return *std::find_if(gpu.begin(), gpu.end(), [&](const trace::span& sp) { return sp.lane == lane; });
  };
  CHECK(on(a).name == "ncclAllReduce + ncclBroadcast (rank 0 of 1 on device 0)");
  CHECK(on(a).bytes == (2u << 20));
  CHECK(on(b).name == "ncclAllGather (rank 0 of 1 on device 0)");
  CHECK(on(b).bytes == (2u << 20));
  // Each call's issue is on the thread's lane, whether or not it shares a GPU span.
  CHECK(spans_of(t, trace::category::collective, trace::lane_kind::host_thread).size() == 3);
}

TEST_CASE("collectives record nothing while tracing is off", "[collectives][trace][gpu]") {
  if (!test::devices_at_least(1)) return;
  auto comms = communicator::init_all(std::vector<int>{0});
  auto rt = runtime::device_runtime::for_device(0);
  stream s = stream::create(rt->context());
  device_buffer x = device_buffer::allocate(rt->context(), 1 << 20);
  trace::clear();
  all_reduce(comms[0], x.span(), x.span(), data_type::float32, reduce_op::sum, s);
  s.synchronize();
  CHECK(spans_of(trace::snapshot(), trace::category::collective, trace::lane_kind::stream).empty());
}
