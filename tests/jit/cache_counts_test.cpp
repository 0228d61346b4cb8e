// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Hit rates made observable: a compiler's memory and disk hit and miss counters, the log line of each compile that
// says them, and the cache directory's `counts` file that sums them over the processes that used it (what
// `cuasync info` shows): added when a compiler goes, under a lock that concurrent writers share, started again from
// zero when torn.
#include <cuasync/jit/cache_counts.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/log.hpp>

#include <catch2/catch.hpp>

#include "kernels.hpp"
#include "scratch.hpp"

#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace cuasync;

namespace {
const jit::target sm90{jit::output_kind::cubin, 90};
jit::disk_cache_settings settings(const std::filesystem::path& dir) { return {true, dir, std::uint64_t{1} << 30}; }
}  // namespace

TEST_CASE("a compiler counts memory and disk hits and misses, and adds them to the directory's counts",
          "[jit][cache]") {
  test::scratch_dir dir;
  const jit::program p = test::small_program(41);
  {
    jit::compiler c(settings(dir.cache()));
    CHECK(c.compile(p, sm90).outcome == jit::cache_outcome::miss);
    CHECK(c.compile(p, sm90).outcome == jit::cache_outcome::memory_hit);
    CHECK(c.compile(p, sm90).outcome == jit::cache_outcome::memory_hit);
    const auto s = c.stats();
    CHECK(s.memory_hits == 2);
    CHECK(s.memory_misses == 1);
    CHECK(s.disk.hits == 0);
    CHECK(s.disk.misses == 1);
    CHECK(s.compiles == 1);
    CHECK(jit::read_cache_counts(dir.cache()).processes == 0);  // added when the compiler goes
  }
  jit::cache_counts after_one = jit::read_cache_counts(dir.cache());
  CHECK(after_one.processes == 1);
  CHECK(after_one.memory_hits == 2);
  CHECK(after_one.memory_misses == 1);
  CHECK(after_one.disk_misses == 1);
  CHECK(after_one.compiles == 1);
  CHECK(after_one.memory_hit_rate() == Approx(2.0 / 3.0));
  { jit::compiler idle(settings(dir.cache())); }  // nothing looked up: nothing added
  CHECK(jit::read_cache_counts(dir.cache()).processes == 1);
  {
    jit::compiler second(settings(dir.cache()));  // as a later process: the disk answers
    CHECK(second.compile(p, sm90).outcome == jit::cache_outcome::disk_hit);
  }
  const jit::cache_counts total = jit::read_cache_counts(dir.cache());
  CHECK(total.processes == 2);
  CHECK(total.memory_misses == 2);
  CHECK(total.disk_hits == 1);
  CHECK(total.disk_misses == 1);
  CHECK(total.compiles == 1);
  CHECK(total.disk_hit_rate() == Approx(0.5));
  CHECK(total.describe() == "memory 2 hits / 2 misses (50.0%), disk 1 hit / 1 miss (50.0%), 1 compile, 0 links");
}

TEST_CASE("the counts file: summed by concurrent writers, a torn one started again", "[jit][cache]") {
  test::scratch_dir dir;
  std::filesystem::create_directories(dir.cache());
  CHECK(jit::read_cache_counts(dir.cache()).empty());  // no file
  std::vector<std::thread> writers;
  for (int t = 0; t < 8; ++t)
    writers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) CHECK(jit::add_cache_counts(dir.cache(), {3, 1, 1, 0, 0, 0, 0}));
    });
  for (auto& w : writers) w.join();
  jit::cache_counts c = jit::read_cache_counts(dir.cache());
  CHECK(c.processes == 200);  // each add counts one
  CHECK(c.memory_hits == 600);
  CHECK(c.memory_misses == 200);
  CHECK(c.disk_hits == 200);

  test::write_file(dir.cache() / jit::cache_counts_file_name, "memory_hits 12\nmemory_mi");  // torn
  CHECK(jit::read_cache_counts(dir.cache()).empty());
  CHECK(jit::add_cache_counts(dir.cache(), {1, 1, 0, 1, 1, 0, 0}));
  c = jit::read_cache_counts(dir.cache());
  CHECK(c.processes == 1);
  CHECK(c.memory_hits == 1);
  CHECK(c.compiles == 1);
  CHECK(!jit::add_cache_counts(dir.path / "no" / "such" / "dir", c));  // false, never a throw
}

TEST_CASE("each compile's log line says the compiler's hit and miss counts so far", "[jit][cache]") {
  test::scratch_dir dir;
  std::mutex m;
  std::vector<std::string> lines;
  const logging::level before = logging::threshold();
  logging::set_sink(
      [&](logging::level, const char* message) {
        std::lock_guard lock(m);
        lines.emplace_back(message);
      },
      logging::level::debug);
  {
    jit::compiler c(settings(dir.cache()));
    c.compile(test::small_program(42), sm90);
    c.compile(test::small_program(42), sm90);
  }
  logging::set_sink({}, before);
  std::vector<std::string> jit_lines;
  for (const auto& l : lines)
    if (l.find("JIT ") != std::string::npos) jit_lines.push_back(l);
  REQUIRE(jit_lines.size() == 2);
  CHECK_THAT(jit_lines[0], Catch::StartsWith("JIT cache miss, compiled by NVRTC: 'small_42.cu' as CUBIN sm_90") &&
                               Catch::EndsWith("; memory 0 hits / 1 miss (0.0%), disk 0 hits / 1 miss (0.0%), "
                                               "1 compile, 0 links"));
  CHECK_THAT(jit_lines[1], Catch::StartsWith("JIT memory cache hit") &&
                               Catch::Contains("memory 1 hit / 1 miss (50.0%)"));
}
