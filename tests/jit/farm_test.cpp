// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The compile farm (jit/include/cuasync/jit/compile_farm.hpp): results equal in-process compiles byte for byte; a
// worker that aborts, exits or hangs fails only its compile, with the cause named, and is replaced; the compiler's
// caches in front of it; the in-process fallback. The failures come from a test-only NVRTC (nvrtc_farm_shim.cpp)
// that only the workers load, through farm_options::environment. No GPU.
#include <cuasync/jit/compile_farm.hpp>

#include <cuasync/jit/compiler.hpp>
#include <cuasync/log.hpp>

#include "child_process.hpp"
#include "kernels.hpp"
#include "scratch.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

using namespace cuasync;
using namespace std::chrono_literals;

namespace {

const jit::target sm90{jit::output_kind::cubin, 90};

// A file of the build folder named relative to this executable's folder.
std::string from_here(const char* relative) {
  return (std::filesystem::canonical("/proc/self/exe").parent_path() / relative).lexically_normal().string();
}

jit::farm_options test_farm(unsigned workers = 2) {
  jit::farm_options o;
  o.workers = workers;
  o.worker_path = from_here(CUASYNC_TEST_JIT_WORKER);
  return o;
}

// Workers that load the failing NVRTC.
jit::farm_options shim_farm(unsigned workers = 2) {
  jit::farm_options o = test_farm(workers);
  o.environment.push_back("CUASYNC_LIBNVRTC=" + from_here(CUASYNC_TEST_NVRTC_SHIM));
  return o;
}

// A program of its own for each `i`: a template instantiated with i, a header, a name expression.
jit::program distinct(int i) {
  return jit::program("farm_" + std::to_string(i) + ".cu",
                      "#include \"farm_scale.h\"\n"
                      "template <int N> __global__ void scale(float* p) { p[threadIdx.x] *= N * farm_factor; }\n"
                      "extern \"C\" __global__ void plain_" + std::to_string(i) + "(int* p) { p[0] = " +
                          std::to_string(i) + "; }\n")
      .add_header("farm_scale.h", "constexpr float farm_factor = " + std::to_string(i) + ".5f;\n")
      .add_name_expression("scale<" + std::to_string(i) + ">");
}

jit::program marked(const char* marker, const std::string& name) {
  return jit::program(name, std::string("// ") + marker + "\nextern \"C\" __global__ void k(int* p) { p[0] = 1; }\n");
}

void require_same(const jit::compiled_program& a, const jit::compiled_program& b) {
  CHECK(a.name == b.name);
  CHECK(a.target == b.target);
  CHECK(a.lowered_names == b.lowered_names);
  CHECK(a.log == b.log);
  CHECK(a.nvrtc_version == b.nvrtc_version);
  REQUIRE(a.image.size() == b.image.size());
  CHECK(a.image == b.image);
}

template <class F>
bool eventually(F&& f, std::chrono::milliseconds limit = 10s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!f()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

}  // namespace

TEST_CASE("farm compiles equal in-process compiles byte for byte", "[jit][farm][nvrtc]") {
  jit::compile_farm farm(test_farm(2));
  std::vector<std::pair<jit::program, jit::target>> work;
  for (int i = 0; i < 12; ++i) work.emplace_back(distinct(i), sm90);
  for (int i = 0; i < 3; ++i) work.emplace_back(test::small_program(100 + i), jit::target{jit::output_kind::ptx, 80});
  work.emplace_back(test::templates_program(), jit::target{jit::output_kind::ltoir, 90});
  std::vector<std::shared_future<jit::compile_result>> results;
  for (const auto& [p, t] : work) results.push_back(farm.submit(p, t));
  for (std::size_t i = 0; i < work.size(); ++i) {
    INFO(work[i].first.name() << " as " << work[i].second.to_string());
    const jit::compile_result& r = results[i].get();
    CHECK(r.outcome == jit::cache_outcome::miss);
    CHECK(r.key == jit::make_cache_key(work[i].first, work[i].second, {}, jit::nvrtc_library()));
    require_same(*r, jit::compile(work[i].first, work[i].second));
  }
  const auto s = farm.stats();
  CHECK(s.compiles == work.size());
  CHECK(s.failures == 0);
  CHECK(s.workers_started == 2);
  CHECK(s.workers_alive == 2);
  CHECK(s.workers_lost == 0);
  CHECK_FALSE(s.in_process);
  CHECK(s.peak_worker_rss_bytes > (std::uint64_t{8} << 20));
}

TEST_CASE("a compile error in a worker is the compile_error an in-process compile throws", "[jit][farm][nvrtc]") {
  jit::compile_farm farm(test_farm(1));
  const jit::program bad("bad.cu", "extern \"C\" __global__ void k(float* p) {\n  p[0] = undefined_thing;\n}\n");
  jit::compile_options o;
  o.define("FARM_TEST", "1");
  auto f = farm.submit(bad, sm90, o);
  try {
    f.get();
    FAIL("the compile succeeded");
  } catch (const jit::compile_error& e) {
    CHECK(e.program_name() == "bad.cu");
    CHECK(e.code() == make_error_code(NVRTC_ERROR_COMPILATION));
    CHECK_THAT(e.first_error(), Catch::Contains("undefined_thing") && Catch::Contains("2 |"));
    CHECK_THAT(e.log(), Catch::Contains("identifier \"undefined_thing\" is undefined"));
    CHECK(e.options() == o.arguments(sm90));
  }
  // The worker is fine: it compiles the next one.
  CHECK(farm.submit(test::small_program(1), sm90).get()->image.size() > 0);
  CHECK(farm.stats().workers_lost == 0);
  CHECK(farm.stats().failures == 1);
}

TEST_CASE("a worker that aborts fails only its compile, naming the signal, and is replaced", "[jit][farm][nvrtc]") {
  jit::compile_farm farm(shim_farm(2));
  farm.warm_up();
  farm.wait_until_ready();
  REQUIRE(farm.stats().workers_alive == 2);
  auto crash = farm.submit(marked("CUASYNC_FARM_TEST_ABORT", "crashing.cu"), sm90);
  std::vector<std::shared_future<jit::compile_result>> good;
  for (int i = 0; i < 4; ++i) good.push_back(farm.submit(test::small_program(200 + i), sm90));
  try {
    crash.get();
    FAIL("the crashing compile succeeded");
  } catch (const jit::farm_worker_error& e) {
    CHECK(e.program_name() == "crashing.cu");
    CHECK(e.signal() == SIGABRT);
    CHECK(e.exit_status() == -1);
    CHECK_FALSE(e.timed_out());
    CHECK(e.code() == std::errc::owner_dead);
    CHECK_THAT(e.what(), Catch::Contains("crashing.cu") && Catch::Contains("signal 6 (SIGABRT)") &&
                             Catch::Contains("nvrtc farm shim: aborting for 'crashing.cu'"));
    CHECK_THAT(e.worker_stderr(), Catch::Contains("aborting for 'crashing.cu'"));
  }
  for (auto& g : good) CHECK(g.get()->image.size() > 0);
  REQUIRE(eventually([&] { return farm.stats().workers_alive == 2; }));
  CHECK(farm.submit(test::small_program(210), sm90).get()->image.size() > 0);
  const auto s = farm.stats();
  CHECK(s.workers_lost == 1);
  CHECK(s.workers_started == 3);
  CHECK(s.compiles == 5);
  CHECK(s.failures == 1);
}

TEST_CASE("a worker that exits fails its compile with the exit status", "[jit][farm][nvrtc]") {
  jit::compile_farm farm(shim_farm(1));
  try {
    farm.submit(marked("CUASYNC_FARM_TEST_EXIT", "exiting.cu"), sm90).get();
    FAIL("the compile succeeded");
  } catch (const jit::farm_worker_error& e) {
    CHECK(e.signal() == 0);
    CHECK(e.exit_status() == 7);
    CHECK_THAT(e.what(), Catch::Contains("exiting.cu") && Catch::Contains("exited with status 7") &&
                             Catch::Contains("exiting with status 7"));
  }
  CHECK(farm.submit(test::small_program(300), sm90).get()->image.size() > 0);
  CHECK(farm.stats().workers_alive == 1);
}

TEST_CASE("a compile past compile_timeout is killed with its worker, which is replaced", "[jit][farm][nvrtc]") {
  jit::farm_options o = shim_farm(2);
  o.compile_timeout = 1500ms;
  jit::compile_farm farm(o);
  farm.warm_up();  // NVRTC's start-up (slow under the sanitizers on a loaded machine) before the timeout counts
  farm.wait_until_ready();
  const auto begin = std::chrono::steady_clock::now();
  auto hang = farm.submit(marked("CUASYNC_FARM_TEST_HANG", "hanging.cu"), sm90);
  auto good = farm.submit(test::small_program(400), sm90);
  CHECK(good.get()->image.size() > 0);  // the other worker is not held up
  try {
    hang.get();
    FAIL("the hanging compile succeeded");
  } catch (const jit::farm_worker_error& e) {
    CHECK(e.timed_out());
    CHECK(e.signal() == SIGKILL);
    CHECK_THAT(e.what(), Catch::Contains("hanging.cu") && Catch::Contains("timed out after 1.5 s") &&
                             Catch::Contains("hanging for 'hanging.cu'"));
  }
  CHECK(std::chrono::steady_clock::now() - begin >= 1500ms);
  REQUIRE(eventually([&] { return farm.stats().workers_alive == 2; }));
  CHECK(farm.submit(test::small_program(401), sm90).get()->image.size() > 0);
  CHECK(farm.stats().timeouts == 1);
  CHECK(farm.stats().workers_lost == 1);
}

TEST_CASE("destroying a farm fails the compiles it still holds", "[jit][farm][nvrtc]") {
  std::shared_future<jit::compile_result> hang, queued;
  {
    jit::compile_farm farm(shim_farm(1));
    hang = farm.submit(marked("CUASYNC_FARM_TEST_HANG", "held.cu"), sm90);
    queued = farm.submit(test::small_program(500), sm90);
    REQUIRE(eventually([&] { return farm.stats().workers_alive == 1 && farm.stats().queued == 1; }));
  }
  CHECK_THROWS_WITH(hang.get(), Catch::Contains("held.cu") && Catch::Contains("the farm was destroyed"));
  CHECK_THROWS_AS(queued.get(), jit::farm_worker_error);
}

TEST_CASE("a worker is recycled after max_compiles_per_worker", "[jit][farm][nvrtc]") {
  jit::farm_options o = test_farm(1);
  o.max_compiles_per_worker = 2;
  jit::compile_farm farm(o);
  std::vector<std::shared_future<jit::compile_result>> all;  // queued at once: a worker at its limit takes no more
  for (int i = 0; i < 5; ++i) all.push_back(farm.submit(test::small_program(600 + i), sm90));
  for (auto& r : all) CHECK(r.get()->image.size() > 0);
  CHECK(eventually([&] { return farm.stats().workers_recycled == 2; }));
  CHECK(farm.stats().workers_started == 3);
  CHECK(farm.stats().workers_lost == 0);
}

TEST_CASE("a compiler with a farm: a miss is compiled by a worker, stored once, then hit", "[jit][farm][nvrtc]") {
  test::scratch_dir dir;
  jit::compile_farm farm(test_farm(2));
  const jit::program p = distinct(700);
  {
    jit::compiler c(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
    c.use_farm(farm);
    CHECK(c.farm() == &farm);
    const auto miss = c.compile(p, sm90);
    CHECK(miss.outcome == jit::cache_outcome::miss);
    CHECK(std::filesystem::exists(c.disk()->entry_path(miss.key)));
    CHECK(c.disk()->stats().stores == 1);
    const auto hit = c.compile(p, sm90);
    CHECK(hit.outcome == jit::cache_outcome::memory_hit);
    CHECK(hit.program == miss.program);
    CHECK(c.stats().compiles == 1);
    CHECK(farm.stats().compiles == 1);
    require_same(*miss, jit::compile(p, sm90));
  }
  jit::compiler fresh(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
  fresh.use_farm(farm);
  CHECK(fresh.compile(p, sm90).outcome == jit::cache_outcome::disk_hit);
  CHECK(farm.stats().compiles == 1);  // the disk hit never left the process
}

TEST_CASE("compile_async through a farm: one compile for callers of the same key", "[jit][farm][nvrtc]") {
  jit::compile_farm farm(test_farm(2));
  jit::compiler c(jit::disk_cache_settings{false, {}, 0});
  c.use_farm(farm);
  const jit::program p = distinct(800);
  std::mutex m;
  std::vector<jit::compile_result> results;
  std::atomic<int> errors{0};
  auto done = [&](jit::compile_result r, std::exception_ptr e) {
    if (e) ++errors;
    std::lock_guard l(m);
    results.push_back(std::move(r));
  };
  for (int i = 0; i < 4; ++i) c.compile_async(p, sm90, {}, done);
  REQUIRE(eventually([&] {
    std::lock_guard l(m);
    return results.size() == 4;
  }));
  CHECK(errors == 0);
  CHECK(farm.stats().compiles == 1);
  int misses = 0;
  for (const auto& r : results) {
    CHECK(r.program == results.front().program);
    misses += r.outcome == jit::cache_outcome::miss;
  }
  CHECK(misses == 1);
  // A hit completes on the calling thread, before compile_async returns.
  bool called = false;
  c.compile_async(p, sm90, {}, [&](jit::compile_result r, std::exception_ptr) {
    called = r.outcome == jit::cache_outcome::memory_hit;
  });
  CHECK(called);
  // A failure reaches the callback, and a later call compiles again (failures are not cached).
  std::promise<std::exception_ptr> failed;
  c.compile_async(jit::program("bad_async.cu", "__global__ void k() { nope; }"), sm90, {},
                  [&](jit::compile_result, std::exception_ptr e) { failed.set_value(e); });
  CHECK_THROWS_AS(std::rethrow_exception(failed.get_future().get()), jit::compile_error);
}

TEST_CASE("a farm with no worker executable compiles in process and says so once", "[jit][farm][nvrtc]") {
  std::mutex m;
  std::vector<std::string> said;
  const auto before = logging::threshold();
  logging::set_sink([&](logging::level, const char* message) {
    std::lock_guard l(m);
    if (std::string_view(message).find("compile farm") != std::string_view::npos) said.emplace_back(message);
  }, logging::level::info);
  {
    jit::farm_options o = test_farm(2);
    o.worker_path = "/nonexistent/cuasync-jit-worker";
    jit::compile_farm farm(o);
    for (int i = 0; i < 3; ++i) {
      const jit::program p = test::small_program(900 + i);
      require_same(*farm.submit(p, sm90).get(), jit::compile(p, sm90));
    }
    CHECK(farm.stats().in_process);
    CHECK(farm.stats().workers_alive == 0);
    CHECK(farm.stats().start_failures == 1);
    CHECK(farm.stats().compiles == 3);
  }
  logging::set_sink({}, before);
  REQUIRE(said.size() == 1);
  CHECK_THAT(said[0], Catch::Contains("/nonexistent/cuasync-jit-worker") && Catch::Contains("in this process"));
}

TEST_CASE("the worker executable is looked for beside the binary holding the farm", "[jit][farm]") {
  const char* env = std::getenv("CUASYNC_JIT_WORKER");
  if (env) {
    WARN("CUASYNC_JIT_WORKER is set: the search is not checked");
    return;
  }
  const auto candidates = jit::compile_farm::worker_candidates({});
  REQUIRE_FALSE(candidates.empty());
  // This executable links cuasync statically: the first place is its own folder.
  const auto self = std::filesystem::canonical("/proc/self/exe");
  CHECK(candidates.front() == (self.parent_path() / "cuasync-jit-worker").string());
  jit::farm_options named;
  named.worker_path = "/opt/x/cuasync-jit-worker";
  CHECK(jit::compile_farm::worker_candidates(named) == std::vector<std::string>{"/opt/x/cuasync-jit-worker"});
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
TEST_CASE("a compile over the memory cap fails alone", "[jit][farm][nvrtc]") {
  jit::farm_options o = test_farm(1);
  o.memory_cap_bytes = std::uint64_t{128} << 20;  // NVRTC loads, ptxas cannot allocate
  jit::compile_farm farm(o);
  CHECK_THROWS_AS(farm.submit(distinct(1000), sm90).get(), cuda_error);
  jit::compile_farm roomy(test_farm(1));  // the default cap (2 GiB) is enough
  CHECK(roomy.submit(distinct(1000), sm90).get()->image.size() > 0);
}
#endif

TEST_CASE("CUASYNC_JIT_FARM names the default compiler's farm", "[jit][farm]") {
  const char* before = std::getenv("CUASYNC_JIT_FARM");
  const std::string kept = before ? before : "";
  auto with = [](const char* value) {
    ::setenv("CUASYNC_JIT_FARM", value, 1);
    return jit::farm_options::from_environment();
  };
  CHECK_FALSE(with("").has_value());
  CHECK_FALSE(with("0").has_value());
  CHECK_FALSE(with("off").has_value());
  REQUIRE(with("3").has_value());
  CHECK(with("3")->workers == 3);
  REQUIRE(with("auto").has_value());
  CHECK(with("auto")->workers == 0);  // the hardware threads, at most 16, when the farm starts
  CHECK_THROWS_WITH(with("lots"), Catch::Contains("CUASYNC_JIT_FARM='lots'"));
  CHECK_THROWS_AS(with("2x"), cuda_error);
  if (before) ::setenv("CUASYNC_JIT_FARM", kept.c_str(), 1);
  else ::unsetenv("CUASYNC_JIT_FARM");
}

// Run by the case below in a child whose environment asks for a farm.
TEST_CASE("default compiler farm probe", "[.farm_probe]") {
  CUASYNC_CHILD_ONLY();
  jit::compiler& c = jit::default_compiler();
  REQUIRE(c.farm() != nullptr);
  CHECK(c.compile(test::small_program(1100), sm90).outcome == jit::cache_outcome::miss);
  const auto s = c.farm()->stats();
  CHECK(s.compiles == 1);
  CHECK_FALSE(s.in_process);
  std::printf("farm probe: workers=%u started=%llu\n", s.workers, static_cast<unsigned long long>(s.workers_started));
}

TEST_CASE("the default compiler sends its misses to the farm CUASYNC_JIT_FARM asks for", "[jit][farm][nvrtc]") {
  const auto r = test::run_child({"default compiler farm probe", "--success"},
                                 {"CUASYNC_JIT_FARM=2", "CUASYNC_CACHE=0", "CUASYNC_LOG=info",
                                  "CUASYNC_JIT_WORKER=" + from_here(CUASYNC_TEST_JIT_WORKER)});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("farm probe: workers=2 started=1") &&
                           Catch::Contains("JIT cache miss, compiled by the compile farm"));
}
