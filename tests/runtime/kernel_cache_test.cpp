// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The jit ↔ driver bridge: compile, load once per context, and run JIT-compiled templated kernels.
#include <cuasync/runtime/kernel_cache.hpp>

#include <catch2/catch.hpp>

#include "../jit/kernels.hpp"
#include "call_site.hpp"
#include "gpu.hpp"

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/jit/nvrtc.hpp>

#include <cstring>
#include <random>
#include <vector>

using namespace cuasync;
using test::ctx;

namespace {

// The templates of tests/jit/kernels.hpp (saxpy<float, 256>, ns::reduce<double>, extern "C" fill).
jit::program templates() { return test::templates_program(); }

// No disk cache: these tests measure what this process compiles and loads.
jit::compiler& memory_only_compiler() {
  static jit::compiler c(jit::disk_cache_settings{false, {}, 0});
  return c;
}

// Runs saxpy<float, 256> from `k` on random data and checks every element.
void check_saxpy(kernel_ref k) {
  const int n = 100003;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = dist(rng);
    y[i] = dist(rng);
  }
  stream s = stream::create(ctx());
  device_buffer dx = device_buffer::allocate(ctx(), n * sizeof(float));
  device_buffer dy = device_buffer::allocate(ctx(), n * sizeof(float));
  copy_async(s, dx.span(), std::as_bytes(std::span(x)));
  copy_async(s, dy.span(), std::as_bytes(std::span(y)));
  launch(s, k, {.grid = (n + 255) / 256, .block = 256}, 2.0f, dx.data<const float>(), dy.data<float>(), n);
  std::vector<float> out(n);
  copy_async(s, std::as_writable_bytes(std::span(out)), dy.span());
  s.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == 2.0f * x[i] + y[i]);  // 2x is exact: no FMA rounding difference
}

// Runs ns::reduce<double> and checks the sum of random integers (exact in double).
void check_reduce(kernel_ref k) {
  const int n = 65536;
  std::mt19937 rng(11);
  std::vector<double> in(n);
  double expected = 0;
  for (auto& v : in) {
    v = static_cast<double>(static_cast<int>(rng() % 2001) - 1000);
    expected += v;
  }
  stream s = stream::create(ctx());
  device_buffer din = device_buffer::allocate(ctx(), n * sizeof(double));
  device_buffer dout = device_buffer::allocate(ctx(), sizeof(double));
  copy_async(s, din.span(), std::as_bytes(std::span(in)));
  memset_async(s, dout.span(), 0);
  launch(s, k, {.grid = 64, .block = 256}, din.data<const double>(), dout.data<double>(), n);
  double sum = 0;
  copy_async(s, std::as_writable_bytes(std::span(&sum, 1)), dout.span());
  s.synchronize();
  CHECK(sum == expected);
}

}  // namespace

TEST_CASE("kernel_cache refuses an empty context and LTO-IR before compiling", "[runtime][jit]") {
  runtime::kernel_cache cache(memory_only_compiler());
  CHECK_THROWS_WITH(cache.module({}, templates()), Catch::Contains("empty context"));
  CHECK_THROWS_WITH(cache.module({}, templates(), {}, jit::output_request::ltoir),
                    Catch::Contains("LTO-IR cannot be loaded"));
  using test::check_call_site;
  using test::error_of;
  check_call_site(error_of([&] { cache.module({}, templates()); }));
  check_call_site(error_of([&] { cache.kernel({}, templates(), "fill"); }));
  check_call_site(error_of([&] { cache.compiled({}, templates()); }));
  check_call_site(error_of([&] { cache.target_for({}); }));
  CHECK(cache.stats().module_loads == 0);
}

TEST_CASE("a templated kernel is compiled, loaded and run by its name expression", "[runtime][jit][gpu]") {
  runtime::kernel_cache cache(memory_only_compiler());
  check_saxpy(cache.kernel(ctx(), templates(), "saxpy<float, 256>"));
  check_reduce(cache.kernel(ctx(), templates(), "ns::reduce<double>"));
  const auto s = cache.stats();
  CHECK(s.module_loads == 1);  // one module, loaded once, for both kernels
  CHECK(s.module_hits == 1);
}

TEST_CASE("the device's exact architecture gets a CUBIN: sm_90 on an H200", "[runtime][jit][gpu]") {
  runtime::kernel_cache cache(memory_only_compiler());
  const int cc = ctx().device().compute_capability();
  const jit::target t = cache.target_for(ctx());
  INFO("device " << ctx().device().name() << ", compute capability " << cc << ", target " << t.to_string());
  if (jit::nvrtc_library().supports(cc)) CHECK(t == jit::target{jit::output_kind::cubin, cc});
  if (cc == 90) CHECK(t.to_string() == "CUBIN sm_90");
  const auto compiled = cache.compiled(ctx(), templates());
  CHECK(compiled->target == t);
  CHECK(std::memcmp(compiled->image.data(), "\x7f" "ELF", 4) == 0);
  CHECK(cache.module(ctx(), templates()).label() == "templates.cu (" + t.to_string() + ")");
}

TEST_CASE("forced PTX is checked against the driver, JIT-loaded and runs", "[runtime][jit][gpu]") {
  runtime::kernel_cache cache(memory_only_compiler());
  const auto compiled = cache.compiled(ctx(), templates(), {}, jit::output_request::ptx);
  CHECK(compiled->target.kind == jit::output_kind::ptx);
  CHECK(compiled->target.arch <= ctx().device().compute_capability());
  REQUIRE(jit::parse_ptx_isa(compiled->text()));
  CHECK(*jit::parse_ptx_isa(compiled->text()) <= jit::max_ptx_isa_for_driver(detail::driver().driver_version));
  check_saxpy(cache.kernel(ctx(), templates(), "saxpy<float, 256>", {}, jit::output_request::ptx));
  // The CUBIN of the same program is another module.
  check_saxpy(cache.kernel(ctx(), templates(), "saxpy<float, 256>"));
  CHECK(cache.stats().module_loads == 2);
}

TEST_CASE("a second request returns the loaded module and the same kernel", "[runtime][jit][gpu]") {
  runtime::kernel_cache cache(memory_only_compiler());
  jit::compile_options o;
  o.define("UNUSED_TAG", "1");  // a program of its own in the shared compiler
  const kernel_ref a = cache.kernel(ctx(), templates(), "saxpy<float, 256>", o);
  const kernel_ref b = cache.kernel(ctx(), templates(), "saxpy<float, 256>", o);
  CHECK(a.get() == b.get());
  CHECK(cache.stats().module_loads == 1);
  CHECK(cache.stats().module_hits == 1);
}

TEST_CASE("a name expression the program was not compiled with is an error naming it",
          "[runtime][jit][gpu][api_error]") {
  runtime::kernel_cache cache(memory_only_compiler());
  jit::compile_options o;
  o.define("UNUSED_TAG", "1");
  (void)cache.kernel(ctx(), templates(), "saxpy<float, 256>", o);
  CHECK_THROWS_WITH(cache.kernel(ctx(), templates(), "saxpy<double, 256>", o), Catch::Contains("no such kernel"));
}
