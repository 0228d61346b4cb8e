// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The simulated driver's gate kernel (tests/fake_driver/sim_kernels.cpp): it holds its own stream only, as the spin
// kernel of test::gate does on a GPU. It is a no-op on any other driver: the cases that use it start with
// CUASYNC_SIMULATED_ONLY() (simulated_driver.hpp).
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>

#include <atomic>
#include <string_view>

namespace cuasync::test {

inline constexpr char sim_gate_ptx[] = R"(.version 8.0
.target sm_90
.address_size 64
.visible .entry sim_wait_u32(.param .u64 flag) { ret; }
)";

class sim_gate {
 public:
  explicit sim_gate(context_ref ctx)
      : module_(module::load(ctx, std::string_view(sim_gate_ptx), "sim_gate.ptx")),
        flag_(pinned_buffer::allocate(ctx, sizeof(unsigned))) {
    *flag_.data<unsigned>() = 0;
  }
  ~sim_gate() { open(); }
  void close(stream_ref s) {
    std::atomic_ref(*flag_.data<unsigned>()).store(0);
    launch(s, module_.kernel("sim_wait_u32"), {.grid = 1, .block = 1}, flag_.data<unsigned>());
  }
  void open() { std::atomic_ref(*flag_.data<unsigned>()).store(1); }

 private:
  module module_;
  pinned_buffer flag_;
};

}  // namespace cuasync::test
