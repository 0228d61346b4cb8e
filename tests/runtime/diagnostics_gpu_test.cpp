// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The diagnostics (trace/diagnostics.hpp) on traces the library's own hooks record: each test provokes one diagnostic
// through cuasync's driver and runtime API and checks that exactly that one fires; the last runs a clean program
// (pinned memory, non-blocking streams, pools, device-side waits) and checks that none does.
//
// These tests need the hooks of issue 12 (driver/runtime record spans while trace::enable() is on). What they assume
// of them, per the hooks' contract:
// - a launch records a GPU span on its stream's lane (name = kernel name) and a host issue span (stream_id set) on the
//   calling thread's lane; both carry legacy_stream / blocking_stream, and fills_device when the grid is at least
//   SMs x cuOccupancyMaxActiveBlocksPerMultiprocessor;
// - a copy records a GPU span on its direction's copy lane with bytes, stream_id, src and dst, flagged pageable_host
//   when the host side is not page-locked; a memset a GPU span on its stream's lane with dst and bytes;
// - GPU spans are timed by events recorded just before and after the operation, so a span begins when its stream
//   reached the operation (work that waited for SMs shows the wait inside its span);
// - cuCtxSynchronize is a `sync` host span flagged device_wide, cuStreamSynchronize / cuEventSynchronize flagged
//   host_wait; cuMemAlloc / cuMemFree are `alloc` host spans, pool allocations and frees flagged stream_ordered;
// - the device is described (trace::describe_device) with its SM and copy-engine counts;
// - trace::snapshot() first converts the GPU spans of operations that completed.
// The provoking programs synchronize only with stream synchronizes at their end (nothing is issued after them), so
// no host wait or device-wide synchronization of their own is inside the traced region.
#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/recorder.hpp>

#include <cuasync/runtime/copy.hpp>
#include <cuasync/runtime/launch.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "trace_recording.hpp"

#include <chrono>
#include <set>
#include <thread>

using namespace cuasync;
namespace trace = cuasync::trace;

namespace {

// Records from construction; take() is the timeline so far (after the caller synchronized what it waits for).
// warmed_up() drops what was recorded: a first launch or copy pays one-time costs (events, occupancy queries, the
// device's description) that would stretch the host's gaps.
class recording : public test::trace_recording {
 public:
  void warmed_up() {
    (void)trace::snapshot();  // converts the warm-up's GPU spans now, so that clear() drops them
    trace::clear();
  }
  trace::timeline take() {
    trace::timeline t = trace::snapshot();
    INFO("no spans were recorded: this build has no tracing hooks in driver/ and runtime/");
    REQUIRE_FALSE(t.spans.empty());
    return t;
  }
};

std::set<trace::diagnostic> kinds(const std::vector<trace::finding>& findings) {
  std::set<trace::diagnostic> out;
  for (const trace::finding& f : findings) out.insert(f.kind);
  return out;
}

const trace::finding& the_finding(const std::vector<trace::finding>& findings, trace::diagnostic d) {
  INFO(trace::to_text(findings));
  REQUIRE(kinds(findings) == std::set{d});
  return findings.front();
}

bool example_names(const trace::finding& f, const std::string& text) {
  for (const std::string& e : f.examples)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

launch_config one_block() { return {.grid = 1, .block = 1}; }

}  // namespace

TEST_CASE("diagnostics: an asynchronous copy from a std::vector is a pageable copy", "[gpu][diagnostics]") {
  stream s = stream::create(test::ctx());
  device_buffer d = device_buffer::allocate(test::ctx(), 1 << 20);
  std::vector<std::byte> host(1 << 20, std::byte{1});  // pageable
  recording r;
  copy_async(s, d.span(), std::span<const std::byte>(host));
  s.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::pageable_copy);
  CHECK(f.occurrences == 1);
  CHECK(example_names(f, "H2D (GPU 0)"));
}

TEST_CASE("diagnostics: work on the legacy default stream beside a blocking and a non-blocking stream",
          "[gpu][diagnostics]") {
  const scoped_context current(test::ctx());  // the legacy stream is the current context's
  const stream_ref legacy(CU_STREAM_LEGACY, test::ctx());  // a stream_ref made directly: adopt() refuses it
  stream blocking = stream::create(test::ctx(), {.non_blocking = false});
  stream other = stream::create(test::ctx());
  const kernel_ref k = test::kernels().kernel("empty_kernel");
  recording r;
  launch(other, k, one_block());
  launch(legacy, k, one_block());
  launch(blocking, k, one_block());
  other.synchronize();
  legacy.synchronize();
  blocking.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::default_stream_serialization);
  CHECK(f.occurrences == 1);  // the one launch on the legacy stream
  CHECK(f.summary.find("1 of them on blocking streams") != std::string::npos);
  CHECK(example_names(f, "empty_kernel"));
}

TEST_CASE("diagnostics: a context synchronize between launches", "[gpu][diagnostics]") {
  stream s = stream::create(test::ctx());
  const kernel_ref k = test::kernels().kernel("sleep_ns");
  recording r;
  launch(s, k, one_block(), std::uint64_t{100'000});
  test::ctx().synchronize();
  launch(s, k, one_block(), std::uint64_t{100'000});
  s.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::device_synchronize);
  CHECK(f.occurrences == 1);
  CHECK(example_names(f, "cuCtxSynchronize"));
}

TEST_CASE("diagnostics: uploads and downloads on one stream never overlap", "[gpu][diagnostics]") {
  auto rt = runtime::device_runtime::for_device(0);
  constexpr std::size_t bytes = 8 << 20;  // ~0.2 ms a copy: well above the clock's noise
  stream s = stream::create(rt->context());
  device_buffer d = device_buffer::allocate(rt->context(), bytes);
  runtime::pinned_block in = rt->pinned()->allocate(bytes), out = rt->pinned()->allocate(bytes);
  recording r;
  for (int round = 0; round < 4; ++round) {
    copy_async(s, d.span(), std::span<const std::byte>(in.bytes()));
    copy_async(s, out.bytes(), d.span());
  }
  s.synchronize();
  const trace::timeline t = r.take();
  REQUIRE(t.device(0));  // the hooks described the device
  if (t.device(0)->copy_engines < 2) {
    WARN("device 0 has " << t.device(0)->copy_engines << " copy engine(s): the diagnostic does not apply");
    return;
  }
  const auto findings = trace::diagnose(t);
  const trace::finding& f = the_finding(findings, trace::diagnostic::copies_not_overlapped);
  CHECK(f.occurrences == 8);
  CHECK(f.explanation.find("Every copy was issued on stream") != std::string::npos);
}

// [concurrent]: the small kernel must be ready while the big one runs (compute-sanitizer serializes kernels).
TEST_CASE("diagnostics: a kernel that fills every SM holds back another stream's kernel",
          "[gpu][diagnostics][concurrent]") {
  stream a = stream::create(test::ctx()), b = stream::create(test::ctx());
  const kernel_ref spin = test::kernels().kernel("sleep_ns");
  const kernel_ref small = test::kernels().kernel("empty_kernel");
  // 1,024-thread blocks: at most 2 fit an SM (2,048 threads), so 8 per SM are at least 4 waves of 2 ms each.
  const auto sms = static_cast<unsigned>(device::get(0).properties().multiprocessor_count);
  const launch_config filling{.grid = sms * 8, .block = 1024};
  recording r;
  launch(a, spin, filling, std::uint64_t{2'000'000});
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the big kernel holds every SM by now
  launch(b, small, one_block());
  a.synchronize();
  b.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::kernel_filled_device);
  CHECK(f.occurrences == 1);
  CHECK(example_names(f, "sleep_ns on stream"));
  CHECK(example_names(f, "waited: empty_kernel"));
}

// [timing]: the launch must follow the wait within 50 us, which compute-sanitizer's interception can exceed.
TEST_CASE("diagnostics: a stream synchronize, then at once a launch on another stream",
          "[gpu][diagnostics][timing]") {
  stream producer = stream::create(test::ctx()), consumer = stream::create(test::ctx());
  const kernel_ref spin = test::kernels().kernel("sleep_ns");
  const kernel_ref small = test::kernels().kernel("empty_kernel");
  recording r;
  launch(producer, spin, one_block(), std::uint64_t{1'000});  // warm-up: one-time costs of tracing these launches
  launch(consumer, small, one_block());
  producer.synchronize();
  consumer.synchronize();
  r.warmed_up();
  launch(producer, spin, one_block(), std::uint64_t{200'000});
  producer.synchronize();  // the host wait: consumer.wait(event) would do
  launch(consumer, small, one_block());
  consumer.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::host_wait);
  CHECK(f.occurrences == 1);
  CHECK(example_names(f, "cuStreamSynchronize"));
  CHECK(example_names(f, "empty_kernel"));
}

TEST_CASE("diagnostics: device buffers allocated and freed between launches", "[gpu][diagnostics]") {
  stream s = stream::create(test::ctx());
  const kernel_ref fill = test::kernels().kernel("fill_iota");
  constexpr int n = 1 << 16;
  recording r;
  for (int round = 0; round < 3; ++round) {
    device_buffer scratch = device_buffer::allocate(test::ctx(), n * sizeof(int));  // cuMemAlloc
    launch(s, fill, launch_config{.grid = n / 256, .block = 256}, scratch.get(), n, round);
  }  // cuMemFree: waits for the device to be idle
  s.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::allocation_on_hot_path);
  CHECK(f.occurrences >= 2);  // round 0's free, round 1's allocation and free, round 2's allocation
  CHECK(f.summary.find("cuMemAlloc") != std::string::npos);
  CHECK(f.summary.find("cuMemFree") != std::string::npos);
}

// [concurrent]: the upload and the memset must run at once (compute-sanitizer serializes them).
TEST_CASE("diagnostics: two streams write one buffer at once", "[gpu][diagnostics][concurrent]") {
  auto rt = runtime::device_runtime::for_device(0);
  constexpr std::size_t bytes = 64 << 20;  // the upload takes over a millisecond: the memset starts during it
  stream a = stream::create(rt->context()), b = stream::create(rt->context());
  device_buffer d = device_buffer::allocate(rt->context(), bytes);
  runtime::pinned_block in = rt->pinned()->allocate(bytes);
  recording r;
  copy_async(a, d.span(), std::span<const std::byte>(in.bytes()));
  memset_async(b, d.span(), 0);  // nothing orders it after the upload
  a.synchronize();
  b.synchronize();
  const auto findings = trace::diagnose(r.take());
  const trace::finding& f = the_finding(findings, trace::diagnostic::buffer_reused_in_flight);
  CHECK(f.occurrences == 1);
  CHECK(example_names(f, "both write"));
}

// [concurrent]: one slot's download must run beside the other's upload (compute-sanitizer serializes them).
TEST_CASE("diagnostics: a clean pipeline (pinned blocks, non-blocking streams, pools, event waits) has no findings",
          "[gpu][diagnostics][concurrent]") {
  auto rt = runtime::device_runtime::for_device(0);
  constexpr int n = 1 << 16;              // the kernels touch 256 KiB: too few blocks to fill the device
  constexpr std::size_t bytes = 8 << 20;  // the copies move 8 MiB (~0.2 ms): one stream's download runs beside the
                                          // other's upload
  stream a = stream::create(rt->context()), b = stream::create(rt->context());
  runtime::pinned_block in_a = rt->pinned()->allocate(bytes), out_a = rt->pinned()->allocate(bytes);
  runtime::pinned_block in_b = rt->pinned()->allocate(bytes), out_b = rt->pinned()->allocate(bytes);
  const kernel_ref add = test::kernels().kernel("add_value");
  const kernel_ref twice = test::kernels().kernel("twice_plus_one");
  const launch_config cfg{.grid = n / 256, .block = 256};
  recording r;
  // Two slots, one stream each: upload, compute, download, in a stream-ordered buffer from the device's pool. A
  // buffer used by one stream only records no events, so nothing ties a's copies to b's. (Allocated before the
  // loop: a pool allocation on b may reuse memory a freed by making b wait for a, which would serialize the slots.)
  runtime::tracked_buffer x_a = runtime::tracked_buffer::allocate(*rt, a, bytes);
  runtime::tracked_buffer x_b = runtime::tracked_buffer::allocate(*rt, b, bytes);
  for (int batch = 0; batch < 8; ++batch) {
    const bool odd = batch % 2 != 0;
    const stream_ref s = odd ? b : a;
    runtime::tracked_buffer& x = odd ? x_b : x_a;
    runtime::pinned_block& in = odd ? in_b : in_a;
    runtime::pinned_block& out = odd ? out_b : out_a;
    runtime::copy_async(s, x, in);
    runtime::launch(s, add, cfg, runtime::read_writes(x), n, batch);
    runtime::copy_async(s, out, x);
  }
  // A result that crosses streams: b waits for a's kernel on the device (the tracked buffer's cuStreamWaitEvent).
  runtime::tracked_buffer produced = runtime::tracked_buffer::allocate(*rt, a, n * sizeof(int));
  runtime::tracked_buffer consumed = runtime::tracked_buffer::allocate(*rt, b, n * sizeof(int));
  runtime::launch(a, add, cfg, runtime::read_writes(produced), n, 1);
  runtime::launch(b, twice, cfg, runtime::reads(produced), runtime::writes(consumed), n);
  a.synchronize();
  b.synchronize();
  const auto findings = trace::diagnose(r.take());
  INFO(trace::to_text(findings));
  CHECK(findings.empty());
}
