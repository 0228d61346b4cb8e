// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Misuse that must be refused with a cuda_error naming the call and the caller's line, never a crash, another
// stream's work or another exception type: empty handles (kernel_ref, module, stream_ref), ranges that wrap, a
// directory given as a module file. The first cases need no driver (each check comes before any driver call); the
// hidden [.simulated] ones run on the simulated libcuda (CTest driver_misuse_simulated).
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/managed_buffer.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/driver/module.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "child_process.hpp"
#include "simulated_driver.hpp"


#include <array>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>

using namespace cuasync;
using Catch::Contains;
using test::check_call_site;
using test::error_of;

namespace {
// A stream handle that is never given to the driver: the checks below refuse the call before any driver call.
const stream_ref fake_stream(reinterpret_cast<CUstream>(std::uintptr_t{0x5100}), context_ref{});
}  // namespace

TEST_CASE("an empty kernel_ref is refused by launches, naming the call and the caller's line",
          "[driver][launch][misuse]") {
  const kernel_ref k;  // e.g. a failed lookup left it empty
  check_call_site(error_of([&] { launch(fake_stream, k, {.grid = 1, .block = 1}, 1, 2u); }));
  check_call_site(error_of([&] { launch(fake_stream, k, {.grid = 1, .block = 1}); }));
  check_call_site(error_of([&] { launch_raw(fake_stream, k, {.grid = 1, .block = 1}, nullptr); }));
  const cuda_error e = error_of([&] { launch(fake_stream, k, {.grid = 1, .block = 1}, 1); });
  CHECK(e.api() == "cuasync::launch");
  CHECK(e.result() == CUDA_ERROR_INVALID_HANDLE);
  CHECK_THAT(e.detail(), Contains("empty kernel_ref") && Contains(fake_stream.describe()));
  CHECK(error_of([&] { launch_raw(fake_stream, k, {.grid = 1, .block = 1}, nullptr); }).api() ==
        "cuasync::launch_raw");
  // Its accessors answer empty values; those that ask the driver refuse.
  CHECK(k.get() == nullptr);
  CHECK(k.name().empty());
  CHECK(k.params().empty());
  CHECK_FALSE(k.context());
  CHECK(k.max_threads_per_block() == 0);
  check_call_site(error_of([&] { k.num_registers(); }));
  check_call_site(error_of([&] { k.set_max_dynamic_shared_memory(1024); }));
  check_call_site(error_of([&] { k.max_active_blocks_per_multiprocessor(128); }));
}

TEST_CASE("an empty or moved-from module refuses a name alias as it refuses a kernel lookup",
          "[driver][module][misuse]") {
  const module m;
  check_call_site(error_of([&] { m.kernel("fill"); }));
  check_call_site(error_of([&] { m.add_name_alias("fill<int>", "fill_i32"); }));
  CHECK(error_of([&] { m.add_name_alias("fill<int>", "fill_i32"); }).api() == "cuasync::module_ref::add_name_alias");
}

TEST_CASE("module::load_file of a directory is a cuda_error naming the path", "[driver][module][misuse]") {
  const std::filesystem::path dir = std::filesystem::temp_directory_path();
  check_call_site(error_of([&] { module::load_file(context_ref{}, dir); }));
  const cuda_error e = error_of([&] { module::load_file(context_ref{}, dir); });
  CHECK(e.api() == "cuasync::module::load_file");
  CHECK_THAT(e.detail(), Contains(dir.string()) && Contains("directory"));
}

TEST_CASE("an empty stream_ref is refused, never taken for the legacy default stream", "[driver][stream][misuse]") {
  const stream_ref s;
  auto empty_stream = [](const cuda_error& e, std::source_location here = std::source_location::current()) {
    INFO("line " << here.line() << ": " << e.what());
    CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
    CHECK_THAT(e.detail(), Contains("empty stream"));
    check_call_site(e, here);
  };
  empty_stream(error_of([&] { s.wait(event_ref{}); }));
  empty_stream(error_of([&] { s.query(); }));
  empty_stream(error_of([&] { s.synchronize(); }));
  empty_stream(error_of([&] { s.launch_host_func(+[](void*) {}, nullptr); }));
  empty_stream(error_of([&] { event_ref{}.record(s); }));
  empty_stream(error_of([&] { memory_pool_ref{}.allocate_async(s, 64); }));
  empty_stream(error_of([&] { memory_pool_ref::free_async(s, 0x1000); }));
  empty_stream(error_of([&] { managed_buffer{}.prefetch_async(s, memory_location::on_host()); }));
  empty_stream(error_of([&] { pool_buffer::allocate_async(memory_pool_ref{}, s, 64); }));
  CHECK(error_of([&] { s.query(); }).api() == "cuasync::stream_ref::query");
}

TEST_CASE("copies refused for a null pointer or an overlap name the sizes and the stream", "[driver][copy][misuse]") {
  const std::array<std::byte, 8> host{};
  const cuda_error null_dst = error_of([&] { copy_async(fake_stream, device_span{0, 16}, std::span(host)); });
  CHECK_THAT(null_dst.detail(), Contains("null") && Contains("8 bytes") && Contains(fake_stream.describe()));
  const cuda_error null_src = error_of([&] { copy_async(fake_stream, device_span{0x2000, 8}, device_span{0, 8}); });
  CHECK_THAT(null_src.detail(), Contains("null") && Contains("8 bytes") && Contains(fake_stream.describe()));
  const cuda_error overlap =
      error_of([&] { copy_async(fake_stream, device_span{0x2004, 8}, device_span{0x2000, 8}); });
  CHECK_THAT(overlap.detail(), Contains("overlap") && Contains("8 bytes") && Contains(fake_stream.describe()));
}

// ---- on the simulated driver

namespace {
constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_fill_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";

// The simulated driver's controls (tests/fake_driver/control.h).
void set_phase(int phase) {
  void* set = test::simulated_driver_symbol("fake_cuda_set_phase");
  REQUIRE(set);
  reinterpret_cast<void (*)(int)>(set)(phase);
}
std::string report() {
  void* sym = test::simulated_driver_symbol("fake_cuda_report");
  REQUIRE(sym);
  auto rep = reinterpret_cast<int (*)(char*, int)>(sym);
  std::string out(static_cast<std::size_t>(rep(nullptr, 0)), '\0');
  rep(out.data(), static_cast<int>(out.size()));
  return out.c_str();
}
}  // namespace

TEST_CASE("a kernel of a loaded module still launches after the empty-kernel check", "[.simulated][driver][launch]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  module m = module::load(ctx, std::string_view(sim_ptx), "misuse.ptx");
  m.add_name_alias("fill<unsigned>", "sim_fill_u32");
  device_buffer b = device_buffer::allocate(ctx, 16);
  launch(s, m.kernel("fill<unsigned>"), {.grid = 1, .block = 4}, b.get(), 4u, 7u);
  std::array<std::uint32_t, 4> out{};
  copy_async(s, std::span<std::uint32_t>(out), b.span());
  s.synchronize();
  CHECK(out == std::array<std::uint32_t, 4>{7, 7, 7, 7});
}

TEST_CASE("a prefetch range that wraps around the address space is refused", "[.simulated][driver][memory]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  managed_buffer m = managed_buffer::allocate(ctx, 64);
  const device_span wraps{m.get() + 8, std::numeric_limits<std::size_t>::max() - 7};  // end wraps to m.get()
  const cuda_error e = error_of([&] { m.prefetch_async(s, memory_location::on_device(0), wraps); });
  CHECK(e.api() == "cuasync::managed_buffer::prefetch_async");  // ours, not the driver's
  check_call_site(error_of([&] { m.prefetch_async(s, memory_location::on_device(0), wraps); }));
  m.prefetch_async(s, memory_location::on_device(0), device_span{m.get() + 8, 56});  // the last byte: fine
  s.synchronize();
}

TEST_CASE("elapsed_ms of an event never recorded says the events must be recorded", "[.simulated][driver][event]") {
  CUASYNC_SIMULATED_ONLY();
  primary_context ctx = primary_context::retain(0);
  const event a = event::create(ctx, {.timing = true}), b = event::create(ctx, {.timing = true});
  const cuda_error e = error_of([&] { event_ref::elapsed_ms(a, b); });
  CHECK_THAT(e.detail(), Contains("timing events") && Contains("recorded"));
}

TEST_CASE("a destructor's deferred failure is reported only to the context it happened in",
          "[.simulated][driver][context]") {
  CUASYNC_SIMULATED_ONLY();
  std::optional<device_buffer> leftover;
  {
    primary_context ctx = primary_context::retain(0);
    leftover = device_buffer::allocate(ctx, 64);
  }                  // the last user releases the primary context
  leftover.reset();  // its buffer's free fails now, and is deferred
  primary_context ctx = primary_context::retain(0);  // a new life of the primary context, with the same handle
  stream s = stream::create(ctx);
  device_buffer b = device_buffer::allocate(ctx, 64);
  memset_async(s, b.span(), 1);
  CHECK_NOTHROW(s.synchronize());  // healthy: the old life's failure is not this context's
  CHECK_NOTHROW(ctx.synchronize());
  CHECK_FALSE(ctx.take_deferred_error());

  // A failure of this life is still reported, once, even where an older life's failure was kept.
  {
    std::optional<device_buffer> stale;
    {
      primary_context old = std::move(ctx);
      stale = device_buffer::allocate(old, 64);
      s = stream{};
      b = device_buffer{};
    }
    stale.reset();  // deferred for the old life
  }
  ctx = primary_context::retain(0);
  detail::defer_error(ctx.get(), CUDA_ERROR_NOT_PERMITTED, "cuTestRelease", &ctx);
  CHECK(ctx.take_deferred_error() == make_error_code(CUDA_ERROR_NOT_PERMITTED));
  CHECK_FALSE(ctx.take_deferred_error());
  detail::defer_error(ctx.get(), CUDA_ERROR_NOT_PERMITTED, "cuTestRelease", &ctx);
  const cuda_error e = error_of([&] { ctx.synchronize(); });
  CHECK_THAT(e.detail(), Contains("cuTestRelease"));
}

// Run by the test below in a child process, with FAKE_CUDA_FAIL set: the first destroy of one kind fails.
TEST_CASE("release retry child", "[.release_retry_child]") {
  CUASYNC_CHILD_ONLY();
  primary_context ctx = primary_context::retain(0);
  set_phase(1);
  {
    stream s = stream::create(ctx);
    event e = event::create(ctx);
    memory_pool p = memory_pool::create(ctx);
  }
  set_phase(2);
  std::printf("CHILD deferred=%d\n", ctx.take_deferred_error().value());
  std::printf("CHILD %s", report().c_str());
}

TEST_CASE("the destructors of streams events and pools try a failed release once more",
          "[.simulated][driver][lifetime]") {
  CUASYNC_SIMULATED_ONLY();
  for (const char* entry : {"cuStreamDestroy", "cuEventDestroy", "cuMemPoolDestroy"}) {
    const test::child_result r =
        test::run_child({"release retry child"}, {std::string("FAKE_CUDA_FAIL=") + entry + ":1"});
    INFO(entry << ":\n" << r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Contains("fired=1"));           // the first destroy failed ...
    CHECK_THAT(r.output, Contains("CHILD deferred=0"));  // ... and the second succeeded: nothing to report
    const std::size_t live = r.output.find("\nlive ");  // the live objects' line of the report
    REQUIRE(live != std::string::npos);
    const std::string counts = r.output.substr(live + 1, r.output.find('\n', live + 1) - live - 1);
    CHECK_THAT(counts, Contains(" streams=0 events=0") && Contains(" pools=0"));
  }
}
