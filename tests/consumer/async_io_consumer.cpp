// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// A framework's C++ service on the installed cuasync::cuasync: one coroutine on an io_context that awaits an NVRTC
// compile (no GPU needed: CUBIN for sm_90 and PTX) and a wait on host-completed work (the completion engine without a
// GPU) and one through a compile farm's installed worker, checking the results; with a GPU it also awaits a copy, a launch of the compiled kernel and the copy back.
// Exit 0: all checks passed (the GPU part skipped, said so, where there is no GPU); 1: a check failed.
#include <cuasync/async_io.hpp>
#include <cuasync/driver.hpp>
#include <cuasync/engine/host_completion_source.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;

namespace {

constexpr const char* source = R"(
template <class T> __global__ void scale(T* x, T a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
})";

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("consumer_async_io: %s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  failures += !ok;
}

asio::awaitable<void> service() {
  // 1. A compile on the blocking pool, awaited: the io thread never runs NVRTC.
  jit::program program("consumer_scale.cu", source);
  program.add_name_expression("scale<float>");
  const jit::compile_options options;
  jit::compile_result cubin = co_await async_compile(program, 90, options, asio::use_awaitable);
  const std::string_view elf = cubin->text();
  check(elf.size() > 4 && elf.substr(0, 4) == "\x7f" "ELF", "async_compile for sm_90 gave a CUBIN (ELF) of " +
                                                                  std::to_string(elf.size()) + " bytes");
  const std::string& lowered = cubin->lowered_name("scale<float>");
  check(lowered.rfind("_Z", 0) == 0 && lowered.find("scale") != std::string::npos,
        "scale<float> lowered to " + lowered);

  // 1b. The same through a compile farm run by the installed cuasync-jit-worker ($CUASYNC_JIT_WORKER, which
  // run_consumer_test.cmake points at the moved install's).
  if (const char* worker = std::getenv("CUASYNC_JIT_WORKER"); worker && *worker) {
    jit::farm_options fo;
    fo.workers = 1;
    jit::compile_farm farm(fo);
    jit::compiler compiler(jit::disk_cache_settings{false, {}, 0});
    compiler.use_farm(farm);
    jit::program farmed("consumer_farmed.cu", std::string(source) + "// farmed\n");
    farmed.add_name_expression("scale<float>");
    const jit::target sm90{jit::output_kind::cubin, 90};
    jit::compile_result r = co_await async_compile(compiler, farmed, sm90, options, asio::use_awaitable);
    const auto stats = farm.stats();
    check(r.outcome == jit::cache_outcome::miss && stats.compiles == 1 && stats.workers_started == 1 &&
              !stats.in_process && r->image == jit::compile(farmed, sm90).image,
          std::string("a compile farm ran ") + worker + " and its CUBIN equals an in-process compile's");
  } else {
    std::printf("consumer_async_io: skipped the compile farm (CUASYNC_JIT_WORKER is not set)\n");
  }

  // 2. Host-side work completing a token that the completion engine polls: the await resumes once it is done.
  host_completion_source host;
  const std::uintptr_t token = host.create();
  int produced = 0;
  std::thread worker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    produced = 42;
    host.complete(token);
  });
  const auto t0 = std::chrono::steady_clock::now();
  co_await async_wait(co_await asio::this_coro::executor, wait_target{&host, 1, 0, token, nullptr},
                      asio::use_awaitable);
  worker.join();
  check(produced == 42 && std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(15),
        "a host-completed wait resumed after the work it waited for");

  // 3. The GPU part.
  int devices = 0;
  try {
    devices = device::count();
  } catch (const cuda_error& e) {
    std::printf("consumer_async_io: skipped the GPU part (no CUDA driver: %s)\n", e.what());
    co_return;
  }
  if (devices == 0) {
    std::printf("consumer_async_io: skipped the GPU part (no CUDA device)\n");
    co_return;
  }
  auto rt = runtime::device_runtime::for_device(0);
  constexpr int n = 4096;
  std::string name = "scale<float>";
  kernel_ref kernel = co_await async_kernel(*rt, program, name, options, asio::use_awaitable);
  stream owned = stream::create(rt->context());
  stream_ref s = owned;
  auto x = runtime::tracked_buffer::allocate(*rt, s, n * sizeof(float));
  std::vector<float> host_in(n), host_out(n);
  for (int i = 0; i < n; ++i) host_in[i] = float(i);
  std::span<const std::byte> in = std::as_bytes(std::span(host_in));
  std::span<std::byte> out = std::as_writable_bytes(std::span(host_out));
  co_await async_copy(*rt, s, x, in);
  const launch_config config{.grid = (n + 255) / 256, .block = 256};
  co_await async_launch(s, kernel, config, runtime::writes(x), 3.0f, n);
  co_await async_copy(*rt, s, out, x);
  bool right = true;
  for (int i = 0; i < n; ++i) right = right && host_out[i] == 3.0f * float(i);
  check(right, "the awaited copy, launch and copy back on device 0 scaled " + std::to_string(n) + " floats");
}

}  // namespace

int main() try {
  asio::io_context io;
  std::exception_ptr failure;
  asio::co_spawn(io, service(), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) std::rethrow_exception(failure);
  std::printf("consumer_async_io: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::printf("consumer_async_io: FAILED: %s\n", e.what());
  return 1;
}
