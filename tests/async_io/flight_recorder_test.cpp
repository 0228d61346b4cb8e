// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The flight recorder with a hung kernel: a coroutine awaits a launch that never ends, and the recorder's stall dump
// names the kernel, the stream, the device, the call site and the coroutine awaiting it. On the simulated driver
// (hidden, [.simulated]: CTest async_io_misuse_simulated) the gate kernel holds its stream; on a GPU ([gpu]) the spin
// kernel of test::gate does.
#include <cuasync/async_io.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/trace/flight_recorder.hpp>
#include <cuasync/trace/json.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"
#include "sim_gate.hpp"
#include "simulated_driver.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <unistd.h>

namespace asio = boost::asio;
using namespace cuasync;
using namespace std::chrono_literals;
namespace flight = cuasync::trace::flight;

namespace {

// Recording on, stalls of 150 ms dumped into a folder of this test's.
struct recording {
  std::filesystem::path dir;
  recording() {
    flight::disable();
    dir = std::filesystem::temp_directory_path() / ("cuasync-flight-io-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    flight::options o;
    o.stall = 150ms;
    o.directory = dir.string();
    o.signal = 0;
    flight::enable(o);
  }
  ~recording() {
    flight::disable();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Waits (the io thread running meanwhile) for a stall dump that names `kernel`.
flight::dump_result stall_dump_naming(asio::io_context& io, const std::string& kernel, std::uint64_t before) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    io.run_for(5ms);
    if (flight::dumps() > before) {
      flight::dump_result d = flight::last_dump();
      if (d.text.find("GPU stall") != std::string::npos && d.text.find(kernel) != std::string::npos) return d;
    }
  }
  return {};
}

void check_dump(const flight::dump_result& d, const std::string& kernel, stream_ref s) {
  INFO(d.text);
  const std::string stream_line = "stream 0x";
  CHECK(d.text.find("GPU stall: `cuLaunchKernelEx " + kernel + "` (#") != std::string::npos);
  CHECK(d.text.find("(id " + std::to_string(s.id()) + ") on device 0") != std::string::npos);
  CHECK(d.text.find("and the stream is still busy") != std::string::npos);
  CHECK(d.text.find("flight_recorder_test.cpp:") != std::string::npos);  // the call site
  CHECK(d.text.find("serve_hung_request") != std::string::npos);       // the coroutine awaiting it
  CHECK(d.text.find("IN FLIGHT for") != std::string::npos);
  // The await's own completion: its event, or (words alone, the default) its host word's write.
  CHECK((d.text.find("cuEventRecord completion event") != std::string::npos ||
         d.text.find("cuStreamWriteValue64 completion event") != std::string::npos));
  REQUIRE_FALSE(d.json_path.empty());
  const trace::json::value doc = trace::json::parse(slurp(d.json_path));
  bool named = false;
  for (const trace::json::value& ev : doc.find("traceEvents")->as_array())
    if (ev.find("ph")->as_string() == "X" && ev.find("name")->as_string() == kernel)
      named = ev.find("cat")->as_string() == "flight,in_flight";
  CHECK(named);
}

}  // namespace

// A named coroutine: the dump must name it as the one awaiting the hung launch.
asio::awaitable<void> serve_hung_request(stream_ref s, kernel_ref k, unsigned* flag, bool& finished) {
  co_await async_launch(s, k, {.grid = 1, .block = 1}, flag);
  finished = true;
}

TEST_CASE("the flight recorder's stall dump names a hung awaited kernel, its stream, device and coroutine",
          "[.simulated]") {
  CUASYNC_SIMULATED_ONLY();
  recording on;
  const context_ref ctx = test::ctx();
  module m = module::load(ctx, std::string_view(test::sim_gate_ptx), "flight_gate.ptx");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  *flag.data<unsigned>() = 0;
  stream s = stream::create(ctx);
  asio::io_context io;
  bool finished = false;
  const std::uint64_t before = flight::dumps();
  asio::co_spawn(io, serve_hung_request(s, m.kernel("sim_wait_u32"), flag.data<unsigned>(), finished),
                 [](std::exception_ptr e) {
                   if (e) std::rethrow_exception(e);
                 });
  const flight::dump_result d = stall_dump_naming(io, "sim_wait_u32", before);
  check_dump(d, "sim_wait_u32", s);
  CHECK_FALSE(finished);
  std::atomic_ref(*flag.data<unsigned>()).store(1);  // the kernel ends: the await completes
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!finished && std::chrono::steady_clock::now() < until) io.run_for(5ms);
  CHECK(finished);
  // Seen done now: nothing of that stream is in flight any more.
  for (const flight::stream_history& h : flight::take("after").streams)
    if (h.identity.stream_id == s.id()) CHECK(h.in_flight() == 0);
}

TEST_CASE("the flight recorder's stall dump names a hung awaited kernel on the GPU", "[async_io][gpu][flight]") {
  recording on;
  stream s = stream::create(test::ctx());
  kernel_ref spin = test::kernels().kernel("spin_until_flag");
  pinned_buffer flag = pinned_buffer::allocate(test::ctx(), sizeof(int));
  *flag.data<int>() = 0;
  asio::io_context io;
  bool finished = false;
  const std::uint64_t before = flight::dumps();
  asio::co_spawn(io, serve_hung_request(s, spin, reinterpret_cast<unsigned*>(flag.data<int>()), finished),
                 [](std::exception_ptr e) {
                   if (e) std::rethrow_exception(e);
                 });
  const flight::dump_result d = stall_dump_naming(io, "spin_until_flag", before);
  std::atomic_ref(*flag.data<int>()).store(1);  // opened before any check can throw: the kernel must end
  check_dump(d, "spin_until_flag", s);
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!finished && std::chrono::steady_clock::now() < until) io.run_for(5ms);
  CHECK(finished);
}

// A device fault (CTest async_io_flight_fault_simulated: FAKE_CUDA_FAIL=cuEventQuery:1:700, the first query of the
// injection phase answers CUDA_ERROR_ILLEGAL_ADDRESS): the awaited launch fails, and the recorder dumps naming it.
TEST_CASE("the flight recorder dumps when an awaited launch's completion fails with a device fault",
          "[.flight_fault]") {
  CUASYNC_SIMULATED_ONLY();
  if (!std::getenv("FAKE_CUDA_FAIL")) {
    WARN("needs FAKE_CUDA_FAIL=cuEventQuery:1:700 (CTest async_io_flight_fault_simulated)");
    return;
  }
  recording on;
  cuda_completion_source::instance().use_host_words(false);  // seen done by a query, which the injection fails
  const context_ref ctx = test::ctx();
  module m = module::load(ctx, std::string_view(test::sim_gate_ptx), "flight_fault.ptx");
  pinned_buffer flag = pinned_buffer::allocate(ctx, sizeof(unsigned));
  *flag.data<unsigned>() = 1;  // open: the kernel ends at once
  stream s = stream::create(ctx);
  asio::io_context io;
  std::optional<std::error_code> got;
  const std::uint64_t before = flight::dumps();
  auto set_phase = reinterpret_cast<void (*)(int)>(test::simulated_driver_symbol("fake_cuda_set_phase"));
  REQUIRE(set_phase);
  set_phase(1);
  async_launch(s, m.kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag.data<unsigned>(),
               asio::bind_executor(io, [&](std::error_code ec) { got = ec; }));  // completes on this thread
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!got && std::chrono::steady_clock::now() < until) io.run_for(5ms);
  set_phase(2);
  cuda_completion_source::instance().use_host_words(true);
  REQUIRE(got);
  CHECK(got->value() == CUDA_ERROR_ILLEGAL_ADDRESS);
  while (flight::dumps() == before && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(2ms);
  const flight::dump_result d = flight::last_dump();
  INFO(d.text);
  CHECK(d.text.find("device fault: CUDA_ERROR_ILLEGAL_ADDRESS (CUresult 700) on stream 0x") != std::string::npos);
  CHECK(d.text.find("(id " + std::to_string(s.id()) + ") on device 0, with `cuLaunchKernelEx sim_wait_u32` (#1) "
                    "the first not seen done") != std::string::npos);
  CHECK(d.text.find("flight_recorder_test.cpp:") != std::string::npos);
}
