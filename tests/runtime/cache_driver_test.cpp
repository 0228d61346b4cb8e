// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The JIT disk cache under another driver. NVRTC's output does not depend on the driver, so the key has no driver in
// it: a kernel compiled under one driver is a disk hit under a newer one, with the same key. What the driver decides
// is checked at load, cache hit or not: a cached PTX that an older driver cannot JIT is refused naming that driver,
// never loaded. Another device architecture (which the driver reports) is another target and compiles anew. Each
// "process" is a child on the simulated driver (FAKE_CUDA_DRIVER_VERSION, FAKE_CUDA_COMPUTE_CAPABILITY) sharing one
// cache directory.
#include <cuasync/jit/error.hpp>
#include <cuasync/runtime/kernel_cache.hpp>

#include <catch2/catch.hpp>

#include "../jit/kernels.hpp"
#include "../jit/scratch.hpp"
#include "child_process.hpp"
#include "simulated_driver.hpp"

#include <cstdio>
#include <regex>
#include <string>

using namespace cuasync;

TEST_CASE("child: a compile and a load through the disk cache", "[.][cache_driver_child]") {
  CUASYNC_CHILD_ONLY();
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  primary_context pc = primary_context::retain(0);
  jit::compiler compiler;  // CUASYNC_CACHE_DIR: the parent's directory
  runtime::kernel_cache cache(compiler);
  const jit::program p = test::templates_program();
  const jit::compile_result r = compiler.compile(p, pc.device().compute_capability());
  std::printf("KEY %s TARGET %s OUTCOME %s\n", r.key.hex().c_str(), r->target.to_string().c_str(),
              jit::to_string(r.outcome));
  try {
    (void)cache.kernel(pc, p, "saxpy<float, 256>");
    std::printf("LOADED\n");
  } catch (const jit::ptx_too_new_error& e) {
    std::printf("REFUSED %s\n", e.what());
  } catch (const cuda_error& e) {
    std::printf("NOT LOADED %s\n", e.what());
  }
}

TEST_CASE("the JIT cache key holds across drivers; the driver's PTX limit and the device's architecture still count",
          "[.simulated][jit_cache_driver]") {
  CUASYNC_SIMULATED_ONLY();
  test::scratch_dir dir;
  struct outcome {
    std::string key, target, cache, load;
  };
  auto run = [&](const char* driver, const char* cc) {
    const test::child_result r =
        test::run_child({"[cache_driver_child]"}, {"CUASYNC_CACHE_DIR=" + dir.cache().string(),
                                                   std::string("FAKE_CUDA_DRIVER_VERSION=") + driver,
                                                   std::string("FAKE_CUDA_COMPUTE_CAPABILITY=") + cc});
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(r.output, m, std::regex("KEY ([0-9a-f]{32}) TARGET (\\S+ \\S+) OUTCOME ([a-z ]+)\n")));
    outcome o{m[1], m[2], m[3], ""};
    if (std::regex_search(r.output, m, std::regex("\n(LOADED|REFUSED|NOT LOADED)([^\n]*)")))
      o.load = m.str(1) + m.str(2);
    return o;
  };
  // Compute capability 9.5: NVRTC has no CUBIN for it, so PTX for compute_90, which the simulated driver loads.
  const outcome first = run("13000", "95");
  CHECK(first.cache == "miss");
  CHECK(first.target == "PTX compute_90");
  CHECK(first.load == "LOADED");

  const outcome newer = run("13020", "95");  // another driver, a newer one
  CHECK(newer.cache == "disk hit");
  CHECK(newer.key == first.key);
  CHECK(newer.load == "LOADED");

  const outcome older = run("12040", "95");  // CUDA 12.4 JITs PTX ISA 8.4 at most: the cached PTX is newer
  CHECK(older.cache == "disk hit");           // the compile's output is the same...
  CHECK(older.key == first.key);
  CHECK_THAT(older.load, Catch::StartsWith("REFUSED") && Catch::Contains("driver (CUDA 12.4)"));  // ...not loadable

  const outcome other_arch = run("13000", "120");  // a device NVRTC has a CUBIN for: another target, another key
  CHECK(other_arch.cache == "miss");
  CHECK(other_arch.target == "CUBIN sm_120");
  CHECK(other_arch.key != first.key);
}
