// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Heap allocations per awaited operation in steady state, counted by replacing the global operator new of this
// executable (its own test executable for that reason): a closed loop of awaited operations, warmed up, then N more
// counted. The bound: zero per operation; a few in total for amortised growth (a vector or a cache reaching its
// size), at most one per 1,000 operations.
//
// Counted: allocations on every thread (the io thread, where an operation is initiated, its work enqueued and its
// coroutine resumed; the poller thread, whose passes find completions under the default policy and post them), except
// those made by the simulated driver itself (the caller's address lies in its library: it allocates per call to
// model the device).
#include <cuasync/async_io.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/engine/completion_source.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <catch2/catch.hpp>

#include "simulated_driver.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <new>
#include <string_view>
#include <thread>

namespace {

thread_local bool counting = false;      // this thread's allocations are counted
std::atomic<bool> counting_all{false};  // every thread's are
std::atomic<std::uint64_t> counted{0};
// The simulated driver's mapped range, when it is the loaded driver (its own allocations are not cuasync's).
std::atomic<std::uintptr_t> skip_begin{0}, skip_end{0};

void note(void* caller) noexcept {
  if (!counting && !counting_all.load(std::memory_order_relaxed)) return;
  const auto a = reinterpret_cast<std::uintptr_t>(caller);
  if (a >= skip_begin.load(std::memory_order_relaxed) && a < skip_end.load(std::memory_order_relaxed)) return;
  counted.fetch_add(1, std::memory_order_relaxed);
}

void* allocate(std::size_t n, std::size_t align, bool nothrow) {
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align)
                                              : std::malloc(n ? n : 1);
  if (!p && !nothrow) throw std::bad_alloc();
  return p;
}

}  // namespace

// NOLINTBEGIN: the replaceable global allocation functions
void* operator new(std::size_t n) {
  note(__builtin_return_address(0));
  return allocate(n, 0, false);
}
void* operator new[](std::size_t n) {
  note(__builtin_return_address(0));
  return allocate(n, 0, false);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  note(__builtin_return_address(0));
  return allocate(n, 0, true);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  note(__builtin_return_address(0));
  return allocate(n, 0, true);
}
void* operator new(std::size_t n, std::align_val_t a) {
  note(__builtin_return_address(0));
  return allocate(n, static_cast<std::size_t>(a), false);
}
void* operator new[](std::size_t n, std::align_val_t a) {
  note(__builtin_return_address(0));
  return allocate(n, static_cast<std::size_t>(a), false);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
// NOLINTEND

using namespace cuasync;
namespace asio = boost::asio;

namespace {

constexpr int warm_up = 10000;
constexpr int measured = 20000;
constexpr std::uint64_t bound = measured / 1000;  // amortised growth only

// Every thread's allocations over `measured` operations after `warm_up`, run by `one()` (an awaitable).
template <class One>
std::uint64_t count_closed_loop(asio::io_context& io, One one) {
  std::uint64_t result = 0;
  bool finished = false;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        for (int i = 0; i < warm_up; ++i) co_await one();
        const std::uint64_t before = counted.load();
        counting_all = true;
        for (int i = 0; i < measured; ++i) co_await one();
        counting_all = false;
        result = counted.load() - before;
        finished = true;
      },
      [](std::exception_ptr e) {
        if (e) std::rethrow_exception(e);
      });
  io.run();
  REQUIRE(finished);
  return result;
}

// Tokens that are done when first asked: the operation's whole path (initiation, the FIFO, a pass, the completion,
// the resumption) with nothing of a driver in it.
struct done_source final : completion_source {
  poll_result query(std::uintptr_t) noexcept override { return {poll_status::ready, {}, {}}; }
  void release(std::uintptr_t) noexcept override {}
};


// The simulated driver's text and data, found by an address inside it.
void skip_simulated_driver() {
  void* report = test::simulated_driver_symbol("fake_cuda_report");
  REQUIRE(report);
  Dl_info info{};
  REQUIRE(::dladdr(report, &info));
  struct range {
    const char* name;
    std::uintptr_t begin = UINTPTR_MAX, end = 0;
  } r{info.dli_fname};
  dl_iterate_phdr(
      [](dl_phdr_info* i, std::size_t, void* data) {
        auto& r = *static_cast<range*>(data);
        if (!i->dlpi_name || std::strcmp(i->dlpi_name, r.name) != 0) return 0;
        for (int k = 0; k < i->dlpi_phnum; ++k) {
          const ElfW(Phdr)& ph = i->dlpi_phdr[k];
          if (ph.p_type != PT_LOAD) continue;
          r.begin = std::min<std::uintptr_t>(r.begin, i->dlpi_addr + ph.p_vaddr);
          r.end = std::max<std::uintptr_t>(r.end, i->dlpi_addr + ph.p_vaddr + ph.p_memsz);
        }
        return 1;
      },
      &r);
  REQUIRE(r.begin < r.end);
  skip_begin = r.begin;
  skip_end = r.end;
}

constexpr char sim_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_add_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";

}  // namespace

TEST_CASE("the count sees an allocation on the counting thread, and none on another", "[allocations]") {
  std::atomic<bool> go{false};
  std::thread other([&] {  // started before counting: its own start allocates on this thread
    while (!go.load()) std::this_thread::yield();
    delete new int(2);  // not counted: another thread
  });
  const std::uint64_t before = counted.load();
  counting = true;
  auto* p = new int(1);
  go = true;
  other.join();
  counting = false;
  delete p;
  CHECK(counted.load() - before == 1);
}

TEST_CASE("an awaited wait allocates nothing in steady state (host-completed tokens)", "[allocations]") {
  done_source source;
  asio::io_context io;
  std::uintptr_t next = 1;
  const std::uint64_t n = count_closed_loop(io, [&] {
    return async_wait(io.get_executor(), wait_target{&source, 1, 0, next++}, asio::use_awaitable);
  });
  WARN(n << " allocations in " << measured << " awaited waits after " << warm_up << " (bound " << bound << ")");
  CHECK(n <= bound);
}

TEST_CASE("an awaited launch allocates nothing in steady state (simulated driver)", "[allocations][.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  skip_simulated_driver();
  auto rt = runtime::device_runtime::for_device(0);
  module m = module::load(rt->context(), std::string_view(sim_ptx), "allocations.ptx");
  const kernel_ref k = m.kernel("sim_add_u32");
  pinned_buffer word = pinned_buffer::allocate(rt->context(), sizeof(std::uint32_t));
  *word.data<std::uint32_t>() = 0;
  stream s = stream::create(rt->context());
  asio::io_context io;  // the default policy: executor passes after activity, then the poller thread
  auto* p = word.data<std::uint32_t>();
  const std::uint64_t n = count_closed_loop(io, [&] {
    return async_launch(s, k, {.grid = 1, .block = 1}, p, std::uint32_t{1}, std::uint32_t{1}, asio::use_awaitable);
  });
  CHECK(*p == static_cast<std::uint32_t>(warm_up + measured));
  WARN(n << " allocations in " << measured << " awaited launches after " << warm_up << " (bound " << bound << ")");
  CHECK(n <= bound);
}
