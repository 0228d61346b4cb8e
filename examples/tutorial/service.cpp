// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The tutorial's C++ service (docs/tutorial.md): requests served by coroutines on one io thread. Each request copies
// its input to the GPU, runs a kernel that NVRTC compiled at run time, and copies the result back, every step awaited:
// the io thread never waits for the GPU, so while one request's copy or kernel runs it serves the others.
// Without a GPU it still compiles the kernel (NVRTC needs none), then says "no GPU: <reason>" and exits 3.
#include <cuasync/async_io.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdio>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace cuasync;

// [kernel]
// x = a * x + 1, element by element. CUDA C++ as a string: NVRTC compiles it at run time for the GPU it finds, and
// cuasync keeps the result in memory and on disk (~/.cache/cuasync/jit), so a second run loads it in microseconds.
constexpr const char* kernel_source = R"(
extern "C" __global__ void affine(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = a * x[i] + 1.0f;
})";
// [kernel]

constexpr int n = 1 << 20;     // elements per request
constexpr int requests = 16;   // all in flight at once

// [request]
// One request: copy in, launch, copy out, each awaited. Returns how many elements came back wrong.
asio::awaitable<int> request(runtime::device_runtime& rt, stream_ref s, kernel_ref affine, int id) {
  std::vector<float> data(n);  // ordinary (pageable) memory: async_copy stages it through pinned blocks
  for (int i = 0; i < n; ++i) data[i] = float(i % 1000 + id);
  // Device memory in stream order from the device's pool: freed, without waiting, when `buffer` goes.
  auto buffer = runtime::tracked_buffer::allocate(rt, s, n * sizeof(float));
  // Named locals, not temporaries, in co_await expressions (g++ 12 copies class temporaries bitwise there).
  const std::span<const std::byte> in = std::as_bytes(std::span(data));
  const std::span<std::byte> out = std::as_writable_bytes(std::span(data));
  const launch_config config{.grid = (n + 255) / 256, .block = 256};
  co_await async_copy(rt, s, buffer, in);
  co_await async_launch(s, affine, config, runtime::read_writes(buffer), 2.0f, n);  // arguments checked
  co_await async_copy(rt, s, out, buffer);  // completes once the bytes are in `data`
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += data[i] != 2.0f * float(i % 1000 + id) + 1.0f;
  co_return wrong;
}
// [request]

// [serve]
// Compiles the kernel on a thread pool (NVRTC takes 10-100 ms: never on the io thread), then starts every request.
asio::awaitable<void> serve(runtime::device_runtime& rt, int& wrong, int& served) {
  jit::program program("tutorial_affine", kernel_source);
  std::string name = "affine";
  const jit::compile_options options;
  kernel_ref affine = co_await async_kernel(rt, std::move(program), std::move(name), options, asio::use_awaitable);
  auto ex = co_await asio::this_coro::executor;
  for (int id = 0; id < requests; ++id)  // spread over the runtime's non-blocking streams
    asio::co_spawn(ex, request(rt, rt.streams().next(), affine, id),
                   [wrong = &wrong, served = &served](std::exception_ptr e, int w) {  // main's, which outlive io.run()
                     if (e) std::rethrow_exception(e);  // out of io.run(): a device error, a refused argument
                     *wrong += w;
                     ++*served;
                   });
}
// [serve]

// Without a GPU: what can be done still is (the compile, for the oldest architecture this NVRTC supports: NVRTC and
// the source are checked; a GPU gets code for its own architecture), then exit status 3.
asio::awaitable<void> compile_only(int& arch, std::size_t& bytes) {
  arch = jit::nvrtc_library().supported_archs.front();
  jit::program program("tutorial_affine", kernel_source);
  const jit::compile_options options;
  jit::compile_result r = co_await async_compile(std::move(program), arch, options, asio::use_awaitable);
  bytes = r->image.size();
}

int no_gpu(const std::exception& e) {
  asio::io_context io;
  int arch = 0;
  std::size_t bytes = 0;
  asio::co_spawn(io, compile_only(arch, bytes), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();
  std::printf("tutorial: compiled affine for sm_%d without a GPU (%zu bytes)\n", arch, bytes);
  std::printf("no GPU: %s\n", e.what());
  return 3;
}

// [main]
int main() try {
  std::shared_ptr<runtime::device_runtime> rt;
  try {
    rt = runtime::device_runtime::for_device(0);  // the primary context of GPU 0, its pools and streams
  } catch (const driver_not_found_error& e) {
    return no_gpu(e);
  } catch (const stub_library_error& e) {
    return no_gpu(e);
  } catch (const no_device_error& e) {
    return no_gpu(e);
  } catch (const driver_too_old_error& e) {
    return no_gpu(e);
  }
  asio::io_context io;  // one io thread: this one
  int wrong = 0, served = 0;
  asio::co_spawn(io, serve(*rt, wrong, served), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  io.run();  // returns when every request is done
  std::printf("tutorial: %d/%d requests served, %d wrong elements\n", served, requests, wrong);
  return served == requests && wrong == 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "tutorial: %s\n", e.what());
  return 1;
}
// [main]
