// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>

#include <catch2/catch.hpp>

#include "gpu.hpp"

#include <filesystem>
#include <fstream>

using namespace cuasync;
using test::ctx;
using test::kernels;

namespace {
// Runs saxpy from `m` and checks the result on random data.
void check_saxpy(module_ref m) {
  const int n = 10000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) {
    x[i] = 0.5f * i - 17.f;
    y[i] = 3.f - 0.25f * i;
  }
  stream s = stream::create(ctx());
  device_buffer dx = device_buffer::allocate(ctx(), n * 4), dy = device_buffer::allocate(ctx(), n * 4);
  copy_async(s, dx.span(), std::as_bytes(std::span(x)));
  copy_async(s, dy.span(), std::as_bytes(std::span(y)));
  launch(s, m.kernel("saxpy"), {.grid = (n + 255) / 256, .block = 256}, 2.0f, dx.data<const float>(),
         dy.data<float>(), n);
  std::vector<float> out(n);
  copy_async(s, std::as_writable_bytes(std::span(out)), dy.span());
  s.synchronize();
  for (int i = 0; i < n; ++i) REQUIRE(out[i] == 2.0f * x[i] + y[i]);
}
}  // namespace

TEST_CASE("modules load from CUBIN, PTX and fatbin, and from a file", "[driver][module][gpu]") {
  SECTION("CUBIN") { check_saxpy(module::load(ctx(), test::kernels_cubin(), "test.cubin")); }
  SECTION("PTX") { check_saxpy(module::load(ctx(), test::kernels_ptx(), "test.ptx")); }
  SECTION("fatbin") { check_saxpy(module::load(ctx(), test::kernels_fatbin(), "test.fatbin")); }
  SECTION("file") {
    auto path = std::filesystem::temp_directory_path() / "cuasync_test_kernels.cubin";
    {
      std::ofstream f(path, std::ios::binary);
      f.write(reinterpret_cast<const char*>(test::kernels_cubin().data()), test::kernels_cubin().size());
    }
    module m = module::load_file(ctx(), path);
    CHECK(m.label() == "cuasync_test_kernels.cubin");
    check_saxpy(m);
    std::filesystem::remove(path);
    CHECK_THROWS_WITH(module::load_file(ctx(), "/nonexistent/k.cubin"), Catch::Contains("cannot open"));
  }
}

TEST_CASE("a corrupt module image is a clear error", "[driver][module][gpu][api_error]") {
  SECTION("not an image at all") {
    CHECK_THROWS_WITH(module::load(ctx(), std::string_view("garbage bytes, not CUDA code"), "junk.bin"),
                      Catch::Contains("neither CUBIN (ELF), fatbin nor PTX"));
  }
  SECTION("a truncated CUBIN") {
    auto cubin = test::kernels_cubin();
    for (std::size_t keep : {cubin.size() / 3, cubin.size() - 1, std::size_t{40}}) {
      CAPTURE(keep);
      try {
        module::load(ctx(), cubin.first(keep), "truncated.cubin");
        FAIL("no throw");
      } catch (const cuda_error& e) {
        CHECK(e.result() == CUDA_ERROR_INVALID_IMAGE);
        CHECK_THAT(e.what(), Catch::Contains("CUBIN image 'truncated.cubin'") && Catch::Contains("corrupt"));
      }
    }
  }
  SECTION("a truncated fatbin") {
    auto fatbin = test::kernels_fatbin();
    CHECK_THROWS_WITH(module::load(ctx(), fatbin.first(fatbin.size() / 2), "truncated.fatbin"),
                      Catch::Contains("fatbin payload extends past the image"));
  }
  SECTION("PTX that does not compile reports the JIT log") {
    std::string ptx(reinterpret_cast<const char*>(test::kernels_ptx().data()), test::kernels_ptx().size());
    ptx.replace(ptx.find(".entry"), 6, ".entry_broken");
    try {
      module::load(ctx(), ptx, "broken.ptx");
      FAIL("no throw");
    } catch (const cuda_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("JIT log"));
    }
  }
}

TEST_CASE("an unknown kernel name is an error naming it", "[driver][module][gpu][api_error]") {
  CHECK_THROWS_WITH(kernels().kernel("no_such_kernel"),
                    Catch::Contains("kernel 'no_such_kernel'") && Catch::Contains("CUDA_ERROR_NOT_FOUND"));
}

TEST_CASE("kernel parameters and attributes are read once", "[driver][module][gpu]") {
  kernel_ref k = kernels().kernel("saxpy");
  REQUIRE(k.params().size() == 4);
  CHECK(k.params()[0].size == 4);  // float a
  CHECK(k.params()[1].size == 8);  // const float* x
  CHECK(k.params()[3].size == 4);  // int n
  CHECK(k.num_registers() > 0);
  CHECK(k.max_threads_per_block() >= 256);
  CHECK(k.static_shared_memory_bytes() == 0);
  CHECK(kernels().kernel("saxpy").get() == k.get());  // cached
  const int optin = ctx().device().properties().max_shared_memory_per_block_optin;
  k.set_max_dynamic_shared_memory(optin);
  CHECK(k.max_dynamic_shared_memory() == optin);
  CHECK_THROWS_AS(k.set_max_dynamic_shared_memory(optin + 1), cuda_error);
  CHECK(k.max_active_blocks_per_multiprocessor(256) > 0);
  module_ref m = kernels();
  m.add_name_alias("saxpy<float>", "saxpy");
  CHECK(m.kernel("saxpy<float>").get() == k.get());
}

TEST_CASE("wrong arguments are refused before launch, naming the parameter", "[driver][launch][gpu]") {
  stream s = stream::create(ctx());
  kernel_ref k = kernels().kernel("saxpy");
  device_buffer x = device_buffer::allocate(ctx(), 1024);
  SECTION("wrong count") {
    CHECK_THROWS_WITH(launch(s, k, {.grid = 1, .block = 32}, 2.0f, x.data<float>()),
                      Catch::Contains("kernel 'saxpy' takes 4 parameter(s) but 2 argument(s) were given"));
  }
  SECTION("wrong size") {
    CHECK_THROWS_WITH(
        launch(s, k, {.grid = 1, .block = 32}, 2.0, x.data<float>(), x.data<float>(), 256),
        Catch::Contains("kernel 'saxpy' parameter 0 is 4 bytes but the argument given is 8 bytes"));
    CHECK_THROWS_WITH(
        launch(s, k, {.grid = 1, .block = 32}, 2.0f, x.data<float>(), x.data<float>(), std::size_t{256}),
        Catch::Contains("parameter 3 is 4 bytes but the argument given is 8 bytes"));
  }
  SECTION("error names the caller's file") {
    CHECK_THROWS_WITH(launch(s, k, {.grid = 1, .block = 32}), Catch::Contains("module_launch_test.cpp"));
  }
  s.synchronize();
}

TEST_CASE("a C++ kernel's argument types are checked, naming the parameter and both types", "[driver][launch][gpu]") {
  stream s = stream::create(ctx());
  kernel_ref k = kernels().kernel("_Z11typed_saxpyIfEvT_PKS0_PS0_i");
  REQUIRE(k.param_type_names() == std::vector<std::string>{"float", "const float*", "float*", "int"});
  CHECK(kernels().kernel("saxpy").param_types().empty());  // extern "C": sizes only
  device_buffer x = device_buffer::allocate(ctx(), 1024);
  const launch_config cfg{.grid = 1, .block = 32};
  CHECK_THROWS_WITH(launch(s, k, cfg, 2.0f, x.data<double>(), x.data<float>(), 256),
                    Catch::Contains("parameter 1 is const float* but the argument given is double*"));
  CHECK_THROWS_WITH(launch(s, k, cfg, 2, x.data<float>(), x.data<float>(), 256),
                    Catch::Contains("parameter 0 is float but the argument given is int"));
  CHECK_NOTHROW(launch(s, k, cfg, 2.0f, x.data<const float>(), x.data<float>(), 256));
  CHECK_NOTHROW(launch(s, k, cfg, 2.0f, x.get(), x.get(), 256u));  // CUdeviceptr for pointers
  s.synchronize();
}

TEST_CASE("launch dimensions beyond the device's limits are refused", "[driver][launch][gpu]") {
  stream s = stream::create(ctx());
  kernel_ref k = kernels().kernel("empty_kernel");
  const auto& p = ctx().device().properties();
  CHECK_THROWS_WITH(launch(s, k, {.grid = 1, .block = unsigned(p.max_threads_per_block) + 1}),
                    Catch::Contains("block.x = " + std::to_string(p.max_threads_per_block + 1)));
  CHECK_THROWS_WITH(launch(s, k, {.grid = 1, .block = {32, 32, 2}}), Catch::Contains("threads per block exceed"));
  CHECK_THROWS_WITH(launch(s, k, {.grid = {1, unsigned(p.max_grid_dim[1]) + 1}, .block = 1}),
                    Catch::Contains("grid.y"));
  CHECK_THROWS_WITH(launch(s, k, {.grid = 0, .block = 1}), Catch::Contains("grid.x = 0"));
  CHECK_THROWS_WITH(
      launch(s, k, {.grid = 1, .block = 1, .shared_memory_bytes = unsigned(p.max_shared_memory_per_block_optin) + 1}),
      Catch::Contains("dynamic shared memory exceed"));
  // Within limits, with a cluster and a priority: runs.
  launch(s, k, {.grid = 8, .block = 128, .cluster = dims{2}, .priority = 0});
  launch(s, k, {.grid = 4, .block = 64, .cooperative = true});
  s.synchronize();
}
