// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Collectives' faults on the simulated driver (two devices) with the fake NCCL (tests/fake_nccl), hidden
// ([.simulated]): CTest collectives_simulated runs them with CUASYNC_LIBCUDA and CUASYNC_LIBNCCL set. Each case
// resets the fake's knobs and counters; the fake counts any use of a communicator after its abort or destroy.
#include <cuasync/collectives/async_collectives.hpp>
#include <cuasync/collectives/collective_ops.hpp>
#include <cuasync/collectives/communicator.hpp>
#include <cuasync/collectives/detail/nccl_api.hpp>
#include <cuasync/collectives/nccl_error.hpp>
#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/stream.hpp>

#include <catch2/catch.hpp>

#include <boost/asio/use_future.hpp>

#include "fake_nccl_control.hpp"
#include "simulated_driver.hpp"

#include <chrono>
#include <future>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

using namespace cuasync;
using namespace cuasync::collectives;
using namespace std::chrono_literals;
namespace fake = cuasync::test::fake_nccl;

namespace {

constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_wait_u32(.param .u64 flag) { ret; }
.visible .entry sim_sleep_ms(.param .u32 ms) { ret; }
)";

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

// The fake NCCL must be the one loaded (CTest collectives_simulated sets CUASYNC_LIBNCCL); otherwise skip.
bool have_fake() {
  try {
    collectives::detail::nccl();
  } catch (const std::exception& e) {
    WARN("skipped: no NCCL: " << e.what());
    return false;
  }
  if (!fake::loaded()) {
    WARN("skipped: the loaded NCCL is not the fake one (run through CTest collectives_simulated)");
    return false;
  }
  return true;
}

// Waits up to `limit` for the fake's counter to reach `value` (aborts and destroys run on threads of their own).
bool counter_reaches(const char* name, long value, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = clock_type::now() + limit;
  while (fake::counter(name) < value) {
    if (clock_type::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// Two ranks of one init_all on devices 0 and 1, a stream, a buffer and the simulated kernels on each, and a gate
// that holds every stream until opened.
struct two_ranks {
  std::vector<communicator> comms;
  std::vector<stream> streams;
  std::vector<module> modules;
  std::vector<device_buffer> buffers;
  pinned_buffer flag;

  explicit two_ranks(communicator_options o = {}) {
    // The application's own references to the primary contexts, for the whole run: a domain torn down on the
    // disposal thread may release its references after the next case has begun.
    static const std::vector<primary_context> held = [] {
      std::vector<primary_context> v;
      for (int d : {0, 1}) v.push_back(primary_context::retain(d));
      return v;
    }();
    comms = communicator::init_all(std::vector<int>{0, 1}, o);
    for (auto& c : comms) {
      streams.push_back(stream::create(c.context()));
      modules.push_back(module::load(c.context(), std::string_view(sim_ptx), "collectives_sim.ptx"));
      buffers.push_back(device_buffer::allocate(c.context(), 1024));
    }
    flag = pinned_buffer::allocate(comms[0].context(), sizeof(unsigned));
    *flag.data<unsigned>() = 0;
  }
  ~two_ranks() { open(); }
  void gate() {
    for (std::size_t i = 0; i < streams.size(); ++i)
      launch(streams[i], modules[i].kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag.data<unsigned>());
  }
  void open() { __atomic_store_n(flag.data<unsigned>(), 1u, __ATOMIC_RELEASE); }
  void all_reduce_on(std::size_t i) {
    collectives::all_reduce(comms[i], buffers[i].span(), buffers[i].span(), data_type::float32, reduce_op::sum,
                            streams[i]);
  }
  void grouped_all_reduce() {
    group g;
    for (std::size_t i = 0; i < comms.size(); ++i) all_reduce_on(i);
    g.end();
  }
  std::vector<rank_part> parts() const {
    std::vector<rank_part> p;
    for (std::size_t i = 0; i < comms.size(); ++i) p.push_back({comms[i], streams[i]});
    return p;
  }
};

// The code of what `f` threw (empty when it succeeded).
std::error_code code_of(std::future<void>& f) {
  try {
    f.get();
  } catch (const cuda_error& e) {
    return e.code();
  }
  return {};
}

}  // namespace

// The fault domain's teardown (join the abort, ncclCommFinalize/Destroy, the primary contexts' release) waits for
// NCCL; it must never run on the poller, which completes every other wait of the process.
TEST_CASE("a collective wait holding the last reference to its fault domain tears it down off the poller",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  const bool fault = GENERATE(true, false);
  INFO((fault ? "timed out, ncclCommAbort takes 1.5 s" : "completed, ncclCommDestroy takes 1 s"));
  if (fault)
    fake::set("abort_sleep_ms", 1500);
  else
    fake::set("destroy_sleep_ms", 1000);
  std::optional<two_ranks> r(std::in_place, communicator_options{.timeout = fault ? 100ms : 0ms});
  const context_ref other = r->comms[1].context();
  stream unrelated = stream::create(other);
  module m = module::load(other, std::string_view(sim_ptx), "collectives_sim_unrelated.ptx");
  r->gate();
  r->grouped_all_reduce();
  const auto started = clock_type::now();
  auto collective = async_wait_collectives(r->parts(), boost::asio::use_future);
  std::vector<communicator>().swap(r->comms);  // the wait now holds the fault domain's last reference
  std::thread opener([&] {
    std::this_thread::sleep_for(300ms);
    r->open();
  });
  std::this_thread::sleep_for(fault ? 150ms : 320ms);
  launch(unrelated, m.kernel("sim_sleep_ms"), {.grid = 1, .block = 1}, 20u);
  const auto unrelated_started = clock_type::now();
  auto unrelated_wait = async_wait(unrelated, boost::asio::use_future);
  REQUIRE(collective.wait_for(10s) == std::future_status::ready);
  const double collective_ms = ms_since(started);
  REQUIRE(unrelated_wait.wait_for(10s) == std::future_status::ready);
  const double unrelated_ms = ms_since(unrelated_started);
  opener.join();
  CHECK(code_of(collective) == (fault ? std::make_error_code(std::errc::timed_out) : std::error_code()));
  CHECK(code_of(unrelated_wait) == std::error_code());
  CHECK(unrelated_ms < 600);
  CHECK(collective_ms < (fault ? 700 : 900));
  // The teardown still happens, on its own thread.
  CHECK(counter_reaches(fault ? "aborts" : "destroys", 2));
  CHECK(fake::counter("uaf") == 0);
  r.reset();
}

TEST_CASE("an abort waits for a collective call in flight inside NCCL", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  two_ranks r;
  fake::set("coll_sleep_ms", 300);
  std::thread issuer([&] {
    try {
      r.all_reduce_on(0);
    } catch (const cuda_error&) {
      // refused because the domain is aborted: fine, as long as NCCL was not inside it then
    }
  });
  std::this_thread::sleep_for(100ms);
  r.comms[1].abort();  // another coroutine's fault, or the application
  issuer.join();
  CHECK(counter_reaches("aborts", 2));
  CHECK(fake::counter("uaf") == 0);
}

TEST_CASE("an enqueue refused inside a group aborts the domain after the group ends; the end throws",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  two_ranks r;
  fake::set("coll_fail_at", 2);         // rank 1's call
  fake::set("group_end_sleep_ms", 100);  // an abort started at the refusal would be done before NCCL's group end
  {
    group g;
    r.all_reduce_on(0);
    CHECK_THROWS_AS(r.all_reduce_on(1), cuda_error);
    CHECK(r.comms[0].fault() == make_nccl_error_code(collectives::detail::nccl_invalid_argument));
    CHECK(fake::counter("aborts") == 0);  // rank 0's call is still queued in this thread's NCCL group
    try {
      g.end();
      FAIL("the group's end did not report the refused call");
    } catch (const cuda_error& e) {
      CHECK(e.code() == make_nccl_error_code(collectives::detail::nccl_invalid_argument));
    }
  }
  CHECK(group::depth() == 0);
  CHECK(fake::group_depth() == 0);
  CHECK(counter_reaches("aborts", 2));
  CHECK(fake::counter("uaf") == 0);
  CHECK_THROWS_AS(r.all_reduce_on(0), collective_error);
}

TEST_CASE("a group refused by ncclGroupEnd aborts its domains and the end throws", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  two_ranks r;
  fake::set("group_end_fail", collectives::detail::nccl_internal_error);
  CHECK_THROWS_AS(r.grouped_all_reduce(), cuda_error);
  CHECK(group::depth() == 0);
  CHECK(r.comms[0].fault() == make_nccl_error_code(collectives::detail::nccl_internal_error));
  CHECK(counter_reaches("aborts", 2));
  CHECK(fake::counter("uaf") == 0);
}

TEST_CASE("a group ended on another thread is refused without changing either thread's depth", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  std::optional<group> g(std::in_place);
  REQUIRE(group::depth() == 1);
  std::thread other([&] {
    CHECK_THROWS_WITH(g->end(), Catch::Contains("per thread"));
    CHECK(group::depth() == 0);
    CHECK(fake::group_depth() == 0);
  });
  other.join();
  CHECK(group::depth() == 1);
  CHECK(fake::group_depth() == 1);
  g->end();  // on its own thread: ends
  CHECK(group::depth() == 0);
  CHECK(fake::group_depth() == 0);
  g.reset();

  // Destroyed on another thread: the begin thread's group is left as it is (it cannot be ended from here).
  std::optional<group> h;
  std::promise<void> begun, destroyed;
  int depth_after = -1;
  std::thread owner([&] {
    h.emplace();
    begun.set_value();
    destroyed.get_future().wait();
    depth_after = group::depth();
    h->end();
  });
  begun.get_future().wait();
  h.reset();
  CHECK(group::depth() == 0);
  destroyed.set_value();
  owner.join();
  CHECK(depth_after == 1);
}

TEST_CASE("an unknown reduce_op is refused before anything is enqueued", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  two_ranks r;
  CHECK_THROWS_WITH(collectives::all_reduce(r.comms[0], r.buffers[0].span(), r.buffers[0].span(), data_type::float32,
                                            static_cast<reduce_op>(99), r.streams[0]),
                    Catch::Contains("reduce op 99"));
  CHECK_THROWS_WITH(collectives::reduce_scatter(r.comms[0], r.buffers[0].span(),
                                                device_span{r.buffers[0].span().ptr, 512}, data_type::float32,
                                                static_cast<reduce_op>(-1), r.streams[0]),
                    Catch::Contains("reduce op -1"));
  CHECK(fake::counter("collectives") == 0);
  CHECK(r.comms[0].fault() == std::error_code());
}

TEST_CASE("NCCL's messages come from the loaded library", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  CHECK(make_nccl_error_code(collectives::detail::nccl_remote_error).message() == "FAKE NCCL: remote error");
}

TEST_CASE("communicator options and waits are checked", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  CHECK_THROWS_WITH(communicator::init_all(std::vector<int>{0, 1}, {.timeout = -5ms}), Catch::Contains("timeout"));
  CHECK_THROWS_WITH(communicator::init_rank(unique_id::generate(), 1, 0, 0, {.timeout = -1ms}),
                    Catch::Contains("timeout"));
  CHECK(fake::counter("inits") == 0);
  two_ranks r;
  CHECK_THROWS_WITH(async_wait_collective(r.comms[0], r.streams[1], boost::asio::use_future),
                    Catch::Contains("device 1"));
}

TEST_CASE("a failed ncclGetVersion is refused by the loader", "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  if (!have_fake()) return;
  fake::scope reset;
  fake::set("version_fail", collectives::detail::nccl_internal_error);
  CHECK_THROWS_WITH(collectives::detail::open_nccl(), Catch::Contains("ncclGetVersion"));
}
