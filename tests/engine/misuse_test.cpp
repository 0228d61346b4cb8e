// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Misuse of the CUDA completion source refused at the call, before anything reaches the poller thread: an empty
// pooled event handed to a wait (no driver needed), and an admission ticket recorded on another stream than the one
// it was admitted on (hidden [.simulated]: CTest engine_misuse_simulated runs it on the simulated libcuda).
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/completion_callbacks.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/event_pool.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "simulated_driver.hpp"

#include <atomic>
#include <future>
#include <string_view>

using namespace cuasync;
using Catch::Contains;
using test::check_call_site;
using test::error_of;
using namespace std::chrono_literals;

TEST_CASE("an empty pooled_event is refused as a wait target (its token would be null)", "[engine][misuse]") {
  pooled_event empty;
  check_call_site(error_of([&] { (void)std::move(empty).into_target(); }));
  const cuda_error e = error_of([&] { (void)cuda_completion_source::target(pooled_event{}, nullptr); });
  CHECK(e.api() == "cuasync::pooled_event::into_target");
  CHECK(e.result() == CUDA_ERROR_INVALID_HANDLE);
  CHECK_THAT(e.detail(), Contains("empty pooled_event"));
}

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_wait_u32(.param .u64 flag) { ret; }
)";

struct promised final : completion_callback {
  std::promise<std::error_code> done;
  void complete(std::error_code ec) noexcept override { done.set_value(ec); }
};
}  // namespace

TEST_CASE("a ticket recorded on another stream than its own is refused, its place given back",
          "[.simulated][engine][admission]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  auto& source = cuda_completion_source::instance();
  std::shared_ptr<event_pool> pool = event_pool::for_context(ctx);
  module m = module::load(ctx, std::string_view(sim_ptx), "misuse_gate.ptx");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  *flag.data<unsigned>() = 0;
  stream a = stream::create(ctx), b = stream::create(ctx);
  struct opens_gate {  // on every way out: the context's release waits for b's work
    unsigned* flag;
    ~opens_gate() { std::atomic_ref(*flag).store(1); }
  } gate{flag.data<unsigned>()};
  launch(b, m.kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag.data<unsigned>());  // b cannot finish

  admission_ticket t = source.try_admit(a);
  REQUIRE(t);
  CHECK(pool->admitted() == 1);
  // Recorded on b it would join a's FIFO (the key comes from the ticket) and complete with a's work, before b's.
  // Refused at once: the refusal does not wait for b (held by the gate).
  check_call_site(error_of([&] { (void)source.record(b, std::move(t)); }));
  admission_ticket t2 = source.try_admit(a);
  const cuda_error e = error_of([&] { (void)source.record(b, std::move(t2)); });
  CHECK(e.api() == "cuasync::cuda_completion_source::record");
  CHECK_THAT(e.detail(), Contains("admitted on another stream"));
  CHECK(pool->admitted() == 0);  // both places given back

  // Recorded on its own stream it is taken: the wait completes with a's work, while b is still held.
  promised on_a;
  auto done = on_a.done.get_future();
  admission_ticket t3 = source.try_admit(a);
  completion_callbacks::instance().wait(source.record(a, std::move(t3)).into_target(), &on_a);
  REQUIRE(done.wait_for(10s) == std::future_status::ready);
  CHECK_FALSE(done.get());
  CHECK_FALSE(b.query());
  std::atomic_ref(*flag.data<unsigned>()).store(1);
  b.synchronize();
}
