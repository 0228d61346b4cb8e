// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Faults on the GPU, each in a child process with a time bound: an out-of-bounds write, __trap(), a device assert
// (the context dies: sticky), an allocation larger than the device, launches asking for too many resources (the
// context survives), and a kernel that never ends and is abandoned. In each, the waiters of both libraries a
// framework would use are pending when the fault happens (a gate kernel holds the stream): coroutines of the C++
// library, and a callback and fd records of the C ABI (libcuasync.so, dlopen()ed, on the same primary context and
// the same stream). Every waiter must get an error naming the cause, nothing may hang, teardown must end, and where
// the context survives, both must stay usable.
#include "c_abi_client.hpp"
#include "child_process.hpp"
#include "exit_watchdog.hpp"
#include "gpu.hpp"

#include <cuasync/async_io.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <catch2/catch.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;

namespace {

constexpr launch_config one{.grid = 1, .block = 1};

// "CUDA_ERROR_ILLEGAL_ADDRESS" for 700: the first word of the category's message.
std::string result_name(int r) {
  const std::string m = make_error_code(static_cast<CUresult>(r)).message();
  return m.substr(0, m.find(' '));
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// What every waiter got, one line each: "WAITER <name>: <result name> | <message>" (the child's output).
void report(const char* name, const std::string& result, const std::string& message = {}) {
  std::printf("WAITER %s: %s | %s\n", name, result.c_str(), one_line(message).c_str());
  std::fflush(stdout);
}
void report(const char* name, const cuda_error& e) { report(name, result_name(e.result()), e.what()); }
void report(const char* name, const cuasync_completion_record& r) {
  report(name, r.code == CUASYNC_OK ? "ok" : r.code == CUASYNC_ERROR_CANCELLED ? "cancelled" : result_name(r.cuda_result),
         "C ABI completion, token " + std::to_string(r.token));
}

// Device 0's runtime, the test kernels loaded into it, a stream, and a gate: a kernel that spins until the host
// writes its flag, so that everything enqueued after it is pending when the fault happens.
struct device_setup {
  std::shared_ptr<runtime::device_runtime> rt = runtime::device_runtime::create(0);
  module kernels = module::load(rt->context(), test::kernels_fatbin(), "test_kernels.fatbin");
  stream s = stream::create(rt->context());
  pinned_buffer flag = pinned_buffer::allocate(rt->context(), sizeof(int));

  void close_gate() {
    *flag.data<volatile int>() = 0;
    launch(s, kernels.kernel("spin_until_flag"), one, flag.data<int>());
  }
  void open_gate() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *flag.data<volatile int>() = 1;
  }
};

// A coroutine that reports what its awaited operation ended with.
template <class Op>
void spawn_waiter(asio::io_context& io, const char* name, Op op) {
  asio::co_spawn(
      io,
      [name, op]() -> asio::awaitable<void> {
        try {
          co_await op();
          report(name, "ok");
        } catch (const cuda_error& e) {
          report(name, e);
        } catch (const std::exception& e) {
          report(name, "exception", e.what());
        }
      },
      asio::detached);
}

// The faults that kill the context: the faulting launch is awaited by a coroutine; a copy and a stream wait behind
// it by two more; the C ABI waits on the same stream with a callback and two fd records.
void sticky_fault(const std::string& kind) {
  device_setup d;
  test::c_abi_client c(test::c_abi_library(), d.s.get());
  auto host = d.rt->pinned()->allocate(4096);
  auto buf = runtime::tracked_buffer::allocate(*d.rt, d.s, 4096);
  d.close_gate();

  asio::io_context io;
  stream_ref s = d.s;
  kernel_ref k = kind == "oob" ? d.kernels.kernel("write_to")
                 : kind == "trap" ? d.kernels.kernel("trap_kernel")
                                  : d.kernels.kernel("assert_zero");
  spawn_waiter(io, "coroutine faulting-launch", [&]() -> asio::awaitable<void> {
    if (kind == "oob") co_await async_launch(s, k, one, reinterpret_cast<int*>(0x10), 1);
    else if (kind == "trap") co_await async_launch(s, k, one);
    else co_await async_launch(s, k, one, 1);
  });
  spawn_waiter(io, "coroutine copy-behind", [&]() -> asio::awaitable<void> {
    co_await async_copy(*d.rt, s, host, buf);
  });
  spawn_waiter(io, "coroutine stream-wait", [&]() -> asio::awaitable<void> {
    co_await async_wait(co_await asio::this_coro::executor, s, asio::use_awaitable);
  });
  io.poll();  // the coroutines enqueue their work (behind the gate)

  cuasync_stream_wait_args w{CUASYNC_STREAM_WAIT_ARGS_SIZE, c.stream(), c.completion(1, true)};
  c.check(c.api().stream_wait(&w), "stream_wait (callback)");
  w.completion = c.completion(2, false);
  c.check(c.api().stream_wait(&w), "stream_wait (fd)");
  std::vector<std::byte> pageable(1 << 20);
  cuasync_copy_args cp{CUASYNC_COPY_ARGS_SIZE, c.stream(), pageable.data(), reinterpret_cast<void*>(buf.get()), 4096,
                       c.completion(3, false)};
  c.check(c.api().copy(&cp), "copy (fd)");

  d.open_gate();
  io.run_for(30s);
  for (const auto& r : c.callbacks(1, 30s)) report("c-abi callback", r);
  for (const auto& r : c.drain(2, 30s)) report("c-abi fd", r);

  // Teardown: everything goes (the destroys may report the fault; they must end).
  for (const auto& line : c.teardown()) std::printf("TEARDOWN said %s\n", one_line(line).c_str());
  std::printf("TEARDOWN ok\n");
  std::fflush(stdout);
}

// A trapping launch awaited alone on its stream with host words standing alone (use_words_alone): its wait records
// no event, so only a query of its slot's event (recorded for some earlier wait, or never) can bring the fault. The
// one waiter must get the trap's error within the run, not hang.
void word_alone_fault() {
  device_setup d;
  auto& source = cuda_completion_source::instance();
  source.use_host_words(true);
  source.use_words_alone(true);
  event_pool::for_context(d.rt->context())->prepare(4);  // words ready (a pool grows them in the background)
  asio::io_context io;
  stream_ref s = d.s;
  const std::uint64_t words = source.host_word_waits();
  spawn_waiter(io, "coroutine empty-first", [&]() -> asio::awaitable<void> {
    co_await async_launch(s, d.kernels.kernel("empty_kernel"), one);  // a word alone completes it
  });
  io.run_for(30s);
  io.restart();
  spawn_waiter(io, "coroutine trap-alone", [&]() -> asio::awaitable<void> {
    co_await async_launch(s, d.kernels.kernel("trap_kernel"), one);
  });
  io.run_for(30s);
  std::printf("WORDS %llu\n", static_cast<unsigned long long>(source.host_word_waits() - words));
  std::printf("TEARDOWN ok\n");
  std::fflush(stdout);
}

// The faults the context survives: an allocation larger than the device, launches asking for more than the kernel
// or the device has. Each is an error naming the call; then both libraries work on the same runtime and stream.
void surviving_fault(const std::string& kind) {
  device_setup d;
  test::c_abi_client c(test::c_abi_library(), d.s.get());
  asio::io_context io;
  stream_ref s = d.s;
  constexpr std::size_t too_much = std::size_t{1} << 40;  // 1 TiB: more than any device
  if (kind == "oom") {
    spawn_waiter(io, "coroutine allocate", [&]() -> asio::awaitable<void> {
      auto huge = runtime::tracked_buffer::allocate(*d.rt, s, too_much);
      co_await async_wait(co_await asio::this_coro::executor, s, asio::use_awaitable);
    });
    try {
      device_buffer::allocate(d.rt->context(), too_much);
      report("driver allocate", "ok");
    } catch (const cuda_error& e) {
      report("driver allocate", e);
    }
    cuasync_buffer_allocate_args ba{CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE, c.runtime(), c.stream(), CUASYNC_MEMORY_DEVICE,
                                    too_much};
    const auto f = c.take(c.api().buffer_allocate(&ba));
    report("c-abi allocate", f.code == CUASYNC_OK ? "ok" : result_name(f.cuda_result), f.message);
  } else {
    kernel_ref bounded = d.kernels.kernel("bounded_256");
    spawn_waiter(io, "coroutine 1024-threads", [&]() -> asio::awaitable<void> {
      co_await async_launch(s, bounded, launch_config{.grid = 1, .block = 1024}, static_cast<int*>(nullptr));
    });
    spawn_waiter(io, "coroutine 100KiB-shared", [&]() -> asio::awaitable<void> {
      co_await async_launch(s, bounded, launch_config{.grid = 1, .block = 32, .shared_memory_bytes = 100 << 10},
                            static_cast<int*>(nullptr));
    });
    // The C ABI with a kernel of its own (compiled by NVRTC through it).
    const char* src = "extern \"C\" __global__ void __launch_bounds__(256) bounded(int* p) { if (p) *p = 1; }\n";
    cuasync_compile_args cc{CUASYNC_COMPILE_ARGS_SIZE, c.runtime(), "bounded.cu", src};
    c.check(c.api().compile(&cc), "compile");
    cuasync_kernel_get_args kg{CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "bounded"};
    c.check(c.api().kernel_get(&kg), "kernel_get");
    void* null = nullptr;
    cuasync_kernel_arg arg{&null, sizeof null};
    cuasync_launch_args la{CUASYNC_LAUNCH_ARGS_SIZE, c.stream(), kg.kernel, {1, 1, 1}, {1024, 1, 1}, 0, &arg, 1,
                           c.completion(1, true)};
    auto f = c.take(c.api().launch(&la));
    report("c-abi 1024-threads", f.code == CUASYNC_OK ? "ok" : result_name(f.cuda_result), f.message);
    la.block[0] = 32;
    la.shared_memory_bytes = 100 << 10;
    f = c.take(c.api().launch(&la));
    report("c-abi 100KiB-shared", f.code == CUASYNC_OK ? "ok" : result_name(f.cuda_result), f.message);
    cuasync_module_destroy_args md{CUASYNC_MODULE_DESTROY_ARGS_SIZE, cc.module};
    c.check(c.api().module_destroy(&md), "module_destroy");
  }
  io.run_for(30s);
  io.restart();

  // Still usable: an awaited round trip through the C++ library, a memset and a copy through the C ABI.
  constexpr int n = 1 << 16;
  std::vector<int> in(n, 40), out(n, 0);
  auto buf = runtime::tracked_buffer::allocate(*d.rt, s, n * sizeof(int));
  spawn_waiter(io, "usable-after coroutine round trip", [&]() -> asio::awaitable<void> {
    co_await async_copy(*d.rt, s, buf, std::span<const int>(in));
    co_await async_launch(s, d.kernels.kernel("add_value"), launch_config{.grid = n / 256, .block = 256},
                          runtime::writes(buf), n, 2);
    co_await async_copy(*d.rt, s, std::span<int>(out), buf);
    if (out[0] != 42 || out[n - 1] != 42) throw std::runtime_error("wrong result after the fault");
  });
  io.run_for(30s);
  cuasync_buffer_allocate_args ba{CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE, c.runtime(), c.stream(), CUASYNC_MEMORY_DEVICE,
                                  4096};
  c.check(c.api().buffer_allocate(&ba), "buffer_allocate (after)");
  cuasync_memset_args ms{CUASYNC_MEMSET_ARGS_SIZE, c.stream(), ba.pointer, 0x5a, 4096, c.completion(10, false)};
  c.check(c.api().memset(&ms), "memset (after)");
  std::vector<unsigned char> back(4096, 0);
  cuasync_copy_args cp{CUASYNC_COPY_ARGS_SIZE, c.stream(), back.data(), ba.pointer, 4096, c.completion(11, true)};
  c.check(c.api().copy(&cp), "copy (after)");
  for (const auto& r : c.drain(1, 30s)) report("usable-after c-abi fd", r);
  for (const auto& r : c.callbacks(1, 30s))
    report("usable-after c-abi callback", back[0] == 0x5a && back[4095] == 0x5a ? "ok" : "wrong-bytes",
           r.code == CUASYNC_OK ? "" : result_name(r.cuda_result));
  cuasync_buffer_free_args bf{CUASYNC_BUFFER_FREE_ARGS_SIZE, ba.buffer};
  c.check(c.api().buffer_free(&bf), "buffer_free");
  for (const auto& line : c.teardown()) std::printf("TEARDOWN said %s\n", one_line(line).c_str());
  std::printf("TEARDOWN ok\n");
  std::fflush(stdout);
}

// A kernel that never ends: the waiters give up (a coroutine's wait is cancelled at its deadline, the C ABI's queue
// is destroyed with its completions pending), and everything is torn down while the kernel still runs.
void abandoned_kernel() {
  // The framework's own objects: the primary context (kept, as PyTorch keeps it), the kernel's module and its flag.
  // A framework with an endless kernel cannot release them (each would wait for the kernel); it leaves them to the
  // process's end, which is what this child does (never destroyed).
  new primary_context(primary_context::retain(device::get(0)));
  auto d = std::make_unique<device_setup>();
  auto c = std::make_unique<test::c_abi_client>(test::c_abi_library(), d->s.get());
  d->close_gate();  // never opened
  asio::io_context io;
  stream_ref s = d->s;
  asio::cancellation_signal cancel;
  async_launch(s, d->kernels.kernel("empty_kernel"), one,
               asio::bind_executor(io, asio::bind_cancellation_slot(cancel.slot(), [](std::error_code ec) {
                 report("handler behind-the-endless-kernel",
                        ec == std::errc::operation_canceled ? "cancelled" : ec ? ec.message() : "ok");
               })));
  asio::steady_timer deadline(io, 300ms);
  deadline.async_wait([&](std::error_code) { cancel.emit(asio::cancellation_type::terminal); });
  cuasync_stream_wait_args w{CUASYNC_STREAM_WAIT_ARGS_SIZE, c->stream(), c->completion(1, true)};
  c->check(c->api().stream_wait(&w), "stream_wait (callback)");
  w.completion = c->completion(2, false);
  c->check(c->api().stream_wait(&w), "stream_wait (fd)");
  io.run_for(30s);
  const auto early = c->drain(1, 200ms).size() + c->callbacks(1, 0ms).size();
  report("c-abi before-abandon", early == 0 ? "pending" : "completed-too-early");
  const auto start = std::chrono::steady_clock::now();
  for (const auto& line : c->teardown()) std::printf("TEARDOWN said %s\n", one_line(line).c_str());
  c.reset();
  new module(std::move(d->kernels));
  new pinned_buffer(std::move(d->flag));
  d.reset();  // cuasync's runtime and the stream
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  std::printf("TEARDOWN ok in %lld ms (the kernel still runs)\n", static_cast<long long>(ms.count()));
  std::fflush(stdout);
  test::arm_exit_watchdog(20s);  // then the process ends (exit: cuasync's and the driver's static teardown)
}

}  // namespace

TEST_CASE("gpu fault child", "[.gpu_fault_child]") {
  CUASYNC_CHILD_ONLY();
  const char* kind = std::getenv("CUASYNC_FAULT_KIND");
  REQUIRE(kind);
  const std::string k = kind;
  if (k == "oob" || k == "trap" || k == "assert") sticky_fault(k);
  else if (k == "word-alone") word_alone_fault();
  else if (k == "oom" || k == "resources") surviving_fault(k);
  else abandoned_kernel();
  std::printf("CHILD END\n");
}

namespace {
struct child_outcome {
  std::string output;
};

child_outcome run_fault(const char* kind) {
  auto r = test::run_child({"gpu fault child"}, {std::string("CUASYNC_FAULT_KIND=") + kind}, std::chrono::seconds(90));
  UNSCOPED_INFO("child output (" << kind << "):\n" << r.output);
  CHECK_FALSE(r.timed_out);
  CHECK(r.exit_code == 0);
  return {r.output};
}

// Coroutine waiters whose error message (after the '|') names `cause` too.
int coroutine_messages_name(const std::string& output, const std::string& cause) {
  int n = 0;
  std::size_t p = 0;
  while ((p = output.find("WAITER coroutine", p)) != std::string::npos) {
    const std::string line = output.substr(p, output.find('\n', p) - p);
    if (auto bar = line.find(" | "); bar != std::string::npos && line.find(cause, bar) != std::string::npos) ++n;
    ++p;
  }
  return n;
}

int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("a faulting kernel reaches every coroutine, C ABI callback and fd consumer, naming the fault",
          "[fault_injection][fault][gpu]") {
  // What each fault is called: the driver's result for it.
  const std::pair<const char*, const char*> faults[] = {
      {"oob", "CUDA_ERROR_ILLEGAL_ADDRESS"}, {"trap", "CUDA_ERROR_LAUNCH_FAILED"}, {"assert", "CUDA_ERROR_ASSERT"}};
  for (auto [kind, cause] : faults) {
    SECTION(kind) {
      const auto c = run_fault(kind);
      // Six waiters, each with the cause; the C++ errors name it in their message too.
      CHECK(count_of(c.output, "WAITER ") == 6);
      CHECK(count_of(c.output, std::string(": ") + cause + " |") == 6);
      CHECK(coroutine_messages_name(c.output, cause) == 3);
      CHECK(c.output.find("TEARDOWN ok") != std::string::npos);
      CHECK(c.output.find("CHILD END") != std::string::npos);
    }
  }
}

TEST_CASE("a fault reaches a wait whose host word stands alone, with no event recorded beside it",
          "[fault_injection][fault][gpu]") {
  const auto c = run_fault("word-alone");
  CHECK(c.output.find("WAITER coroutine empty-first: ok") != std::string::npos);
  CHECK(c.output.find("WAITER coroutine trap-alone: CUDA_ERROR_LAUNCH_FAILED |") != std::string::npos);
  CHECK(c.output.find("WORDS 2") != std::string::npos);  // both waits had a word (alone: no event beside it)
  CHECK(c.output.find("CHILD END") != std::string::npos);
}

TEST_CASE("an allocation larger than the device and launches asking too much fail by name; the runtime stays usable",
          "[fault_injection][fault][gpu]") {
  SECTION("allocation larger than the device") {
    const auto c = run_fault("oom");
    CHECK(count_of(c.output, ": CUDA_ERROR_OUT_OF_MEMORY |") == 3);
    CHECK(c.output.find("cuMemAllocFromPoolAsync") != std::string::npos);
    CHECK(c.output.find("WAITER usable-after coroutine round trip: ok") != std::string::npos);
    CHECK(c.output.find("WAITER usable-after c-abi fd: ok") != std::string::npos);
    CHECK(c.output.find("WAITER usable-after c-abi callback: ok") != std::string::npos);
    CHECK(c.output.find("TEARDOWN ok") != std::string::npos);
  }
  SECTION("too many threads for the kernel, too much shared memory") {
    const auto c = run_fault("resources");
    CHECK(count_of(c.output, "WAITER ") == 7);
    CHECK(count_of(c.output, ": ok |") == 3);  // only the usable-after waiters succeed
    CHECK(c.output.find("exceed this kernel's limit of 256") != std::string::npos);
    CHECK(c.output.find("kernel 'bounded_256'") != std::string::npos);
    CHECK(c.output.find("WAITER usable-after coroutine round trip: ok") != std::string::npos);
    CHECK(c.output.find("TEARDOWN ok") != std::string::npos);
  }
}

TEST_CASE("a kernel that never ends is abandoned: waiters give up, teardown ends while it runs",
          "[fault_injection][fault][gpu]") {
  const auto c = run_fault("abandon");
  CHECK(c.output.find("WAITER handler behind-the-endless-kernel: cancelled") != std::string::npos);
  CHECK(c.output.find("WAITER c-abi before-abandon: pending") != std::string::npos);
  CHECK(c.output.find("TEARDOWN ok in") != std::string::npos);
  CHECK(c.output.find("CHILD END") != std::string::npos);
  CHECK(c.output.find("EXIT HANG") == std::string::npos);  // the process ended by itself, kernel and all
}
