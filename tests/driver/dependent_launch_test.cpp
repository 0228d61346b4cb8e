// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Programmatic dependent launch: which kernels an image shows waiting on the grid before them
// (driver/src/kernel_grid_dependency.hpp), and that a launch asks the driver for PDL only for those.
#include "../../driver/src/kernel_grid_dependency.hpp"

#include <catch2/catch.hpp>

#include <cuasync/driver.hpp>

#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <string>
#include <string_view>
#include <vector>

using namespace cuasync;
using detail::grid_dependency_kernels;

namespace {
std::span<const std::byte> bytes_of(std::string_view s) { return std::as_bytes(std::span(s.data(), s.size())); }

constexpr std::string_view two_entries = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry waits(.param .u64 p) {
  griddepcontrol.wait;
  ret;
}
.func helper() { griddepcontrol.wait; ret; }
.visible .entry plain(.param .u64 p) {
  griddepcontrol.launch_dependents;
  ret;
}
)";
}  // namespace

TEST_CASE("the kernels an image shows waiting on the grid before them", "[driver][module][dependent_launch]") {
  SECTION("PTX: griddepcontrol.wait in the entry's own body; a trigger alone or a wait in a .func does not count") {
    const auto w = grid_dependency_kernels(bytes_of(two_entries), image_format::ptx);
    CHECK(w.count("waits") == 1);
    CHECK(w.count("plain") == 0);
    CHECK(w.size() == 1);
  }
  SECTION("nvcc's images of the test kernels, in every format") {
    for (auto [image, format] : {std::pair{test::kernels_cubin(), image_format::cubin},
                                 std::pair{test::kernels_ptx(), image_format::ptx},
                                 std::pair{test::kernels_fatbin(), image_format::fatbin}}) {
      INFO(to_string(format));
      const auto w = grid_dependency_kernels(image, format);
      CHECK(w.count("chain_add_one") == 1);
      for (const char* plain : {"empty_kernel", "add_value", "saxpy", "spin_until_flag", "burn", "bounded_256"})
        CHECK(w.count(plain) == 0);
    }
  }
  SECTION("a CUBIN of an architecture outside sm_90..sm_12x says nothing") {
    std::vector<std::byte> cubin(test::kernels_cubin().begin(), test::kernels_cubin().end());
    REQUIRE(grid_dependency_kernels(cubin, image_format::cubin).count("chain_add_one") == 1);
    const auto abi_version = static_cast<unsigned char>(cubin[8]);
    cubin[abi_version >= 8 ? 49 : 48] = std::byte{80};  // e_flags' SM: sm_80
    CHECK(grid_dependency_kernels(cubin, image_format::cubin).empty());
  }
  SECTION("any bytes are safe: truncated images give at most what their intact part says") {
    for (auto [image, format] : {std::pair{test::kernels_cubin(), image_format::cubin},
                                 std::pair{test::kernels_ptx(), image_format::ptx},
                                 std::pair{test::kernels_fatbin(), image_format::fatbin}})
      for (std::size_t n : {std::size_t{0}, std::size_t{15}, std::size_t{64}, image.size() / 3, image.size() / 2}) {
        const auto w = grid_dependency_kernels(image.first(n), format);
        CHECK(w.size() <= 1);
      }
  }
}

TEST_CASE("a dependent launch asks the driver for PDL only for a kernel that waits",
          "[.simulated][driver][launch][dependent_launch]") {
  CUASYNC_SIMULATED_ONLY();
  auto last_attributes = reinterpret_cast<int (*)(int*, int)>(test::simulated_driver_symbol(
      "fake_cuda_last_launch_attributes"));
  REQUIRE(last_attributes);
  auto attributes = [&] {
    int ids[8] = {};
    const int n = last_attributes(ids, 8);
    return std::vector<int>(ids, ids + std::min(n, 8));
  };
  constexpr std::string_view waiting = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_fill_u32(.param .u64 p, .param .u32 n, .param .u32 value) { griddepcontrol.wait; ret; }
)";
  constexpr std::string_view not_waiting = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_fill_u32(.param .u64 p, .param .u32 n, .param .u32 value) { ret; }
)";
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  module with = module::load(ctx, waiting, "waits.ptx");
  module without = module::load(ctx, not_waiting, "plain.ptx");
  CHECK(with.kernel("sim_fill_u32").waits_on_grid_dependency());
  CHECK_FALSE(without.kernel("sim_fill_u32").waits_on_grid_dependency());
  device_buffer b = device_buffer::allocate(ctx, 16);
  const std::vector<int> pdl = {CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION};

  launch(s, with.kernel("sim_fill_u32"), {.grid = 1, .block = 4, .dependent_launch = true}, b.get(), 4u, 7u);
  CHECK(attributes() == pdl);
  launch(s, without.kernel("sim_fill_u32"), {.grid = 1, .block = 4, .dependent_launch = true}, b.get(), 4u, 8u);
  CHECK(attributes().empty());
  launch(s, with.kernel("sim_fill_u32"), {.grid = 1, .block = 4}, b.get(), 4u, 9u);  // not asked for
  CHECK(attributes().empty());
  launch(s, with.kernel("sim_fill_u32"), {.grid = 1, .block = 4, .priority = 0, .dependent_launch = true}, b.get(),
         4u, 10u);
  CHECK(attributes() == std::vector<int>{CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                                         CU_LAUNCH_ATTRIBUTE_PRIORITY});
  std::array<std::uint32_t, 4> out{};
  copy_async(s, std::span<std::uint32_t>(out), b.span());
  s.synchronize();
  CHECK(out == std::array<std::uint32_t, 4>{10, 10, 10, 10});
}

// A chain of kernels each reading what the one before wrote: with PDL each may start before its predecessor ends, so
// a wrong result here means the wait did not hold the reads back.
TEST_CASE("a chain of dependent launches gives the plain chain's result", "[driver][launch][dependent_launch][gpu]") {
  stream s = stream::create(test::ctx());
  const kernel_ref step = test::kernels().kernel("chain_add_one");
  REQUIRE(step.waits_on_grid_dependency());
  CHECK_FALSE(test::kernels().kernel("add_value").waits_on_grid_dependency());
  constexpr int n = 1 << 14, chain = 1000;
  device_buffer d = device_buffer::allocate(test::ctx(), n * sizeof(int));
  for (bool dependent : {true, false}) {
    INFO("dependent_launch " << dependent);
    memset_async(s, d.span(), 0);
    for (int k = 0; k < chain; ++k)
      launch(s, step, {.grid = n / 256, .block = 256, .dependent_launch = dependent}, d.data<int>(), n);
    std::vector<int> host(n);
    copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
    s.synchronize();
    CHECK(std::count(host.begin(), host.end(), chain) == n);
  }
  // A kernel without the wait asked for PDL runs in plain stream order: it sees the value the chain left.
  launch(s, step, {.grid = n / 256, .block = 256, .dependent_launch = true}, d.data<int>(), n);
  launch(s, test::kernels().kernel("add_value"), {.grid = n / 256, .block = 256, .dependent_launch = true},
         d.data<int>(), n, 5);
  std::vector<int> host(n);
  copy_async(s, std::as_writable_bytes(std::span(host)), d.span());
  s.synchronize();
  CHECK(std::count(host.begin(), host.end(), chain + 6) == n);
}
