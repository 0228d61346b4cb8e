// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The caches: memory hit after a miss, disk hit in a fresh compiler, bad entries (truncated, flipped byte, older
// format, another key's) detected and recompiled, two processes racing on one entry, directory checks, LRU eviction
// under a tiny cap, and the environment settings.
#include <cuasync/jit/compiler.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "child_process.hpp"
#include "kernels.hpp"
#include "scratch.hpp"

#include <cuasync/jit/nvrtc.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <thread>

using namespace cuasync;
namespace fs = std::filesystem;

namespace {

using test::read_file;
using test::scratch_dir;
using test::write_file;

jit::disk_cache_settings settings(const fs::path& dir, std::uint64_t max_bytes = std::uint64_t{1} << 30) {
  return {true, dir, max_bytes};
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jit") out.push_back(e.path());
  return out;
}

std::size_t temp_files(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) ++n;
  return n;
}

// A synthetic entry of about `size` bytes: no NVRTC needed.
jit::compiled_program fake_program(int tag, std::size_t size) {
  jit::compiled_program p;
  p.name = "fake_" + std::to_string(tag) + ".cu";
  p.target = {jit::output_kind::ptx, 90};
  p.image.assign(size, std::byte{static_cast<unsigned char>(tag)});
  p.lowered_names = {{"k<int>", "_Z1kIiEvv"}};
  p.nvrtc_version = 13000;
  return p;
}

}  // namespace

TEST_CASE("a miss compiles, then memory and disk hit, with counters", "[jit][cache]") {
  scratch_dir dir;
  const jit::program p = test::templates_program();
  const jit::target t{jit::output_kind::cubin, 90};
  jit::compiler first(settings(dir.cache()));
  const auto miss = first.compile(p, t);
  CHECK(miss.outcome == jit::cache_outcome::miss);
  CHECK(fs::exists(first.disk()->entry_path(miss.key)));
  const auto hit = first.compile(p, t);
  CHECK(hit.outcome == jit::cache_outcome::memory_hit);
  CHECK(hit.program == miss.program);  // the same object: no copy
  CHECK(first.stats().memory_hits == 1);
  CHECK(first.stats().compiles == 1);
  CHECK(first.stats().disk.misses == 1);
  CHECK(first.stats().disk.stores == 1);

  SECTION("a fresh compiler (as in a new process) hits the disk, names included") {
    jit::compiler second(settings(dir.cache()));
    const auto disk = second.compile(p, t);
    CHECK(disk.outcome == jit::cache_outcome::disk_hit);
    CHECK(disk->image == miss->image);
    CHECK(disk->lowered_names == miss->lowered_names);
    CHECK(disk->target == t);
    CHECK(second.stats().disk.hits == 1);
    CHECK(second.stats().compiles == 0);
  }
  SECTION("anything that changes the output changes the key") {
    CHECK(jit::make_cache_key(p, t, {}, jit::nvrtc_library()) == miss.key);
    const auto base = jit::make_cache_key(p, t, {}, 13000);
    jit::compile_options fast;
    fast.fast_math = true;
    jit::program with_header = p;
    with_header.add_header("h.h", "x");
    jit::program other_header = p;
    other_header.add_header("h.h", "y");
    CHECK(jit::make_cache_key(p, t, fast, 13000) != base);
    CHECK(jit::make_cache_key(p, {jit::output_kind::ptx, 90}, {}, 13000) != base);
    CHECK(jit::make_cache_key(p, {jit::output_kind::cubin, 80}, {}, 13000) != base);
    CHECK(jit::make_cache_key(p, t, {}, 12090) != base);
    CHECK(jit::make_cache_key(p, t, {}, 13000, jit::cache_format_version + 1) != base);
    CHECK(jit::make_cache_key(with_header, t, {}, 13000) != base);
    CHECK(jit::make_cache_key(with_header, t, {}, 13000) != jit::make_cache_key(other_header, t, {}, 13000));
    CHECK(jit::make_cache_key(jit::program("templates.cu", std::string(test::templates_source) + " "), t, {}, 13000) !=
          jit::make_cache_key(jit::program("templates.cu", test::templates_source), t, {}, 13000));
  }
}

TEST_CASE("a bad disk entry is detected, deleted and recompiled, never loaded", "[jit][cache]") {
  scratch_dir dir;
  const jit::program p = test::small_program(7);
  const jit::target t{jit::output_kind::cubin, 90};
  jit::compiler c(settings(dir.cache()));
  const auto first = c.compile(p, t);
  const fs::path entry = c.disk()->entry_path(first.key);
  const std::string good = read_file(entry);
  REQUIRE(good.size() > 100);

  auto recompile_and_check = [&](const char* reason) {
    c.clear_memory();
    const auto again = c.compile(p, t);
    CHECK(again.outcome == jit::cache_outcome::miss);  // recompiled, not loaded
    CHECK(again->image == first->image);
    CHECK(c.stats().disk.rejected == 1);
    CHECK_THAT(c.disk()->last_rejection(), Catch::Contains(reason));
    CHECK(read_file(entry) == good);  // rewritten whole
    jit::compiler fresh(settings(dir.cache()));
    CHECK(fresh.compile(p, t).outcome == jit::cache_outcome::disk_hit);
  };
  SECTION("truncated") {
    write_file(entry, good.substr(0, good.size() / 2));
    recompile_and_check("truncated");
  }
  SECTION("truncated inside the header") {
    write_file(entry, good.substr(0, 20));
    recompile_and_check("truncated");
  }
  SECTION("a flipped byte") {
    std::string bad = good;
    bad[bad.size() - 100] ^= 0x01;
    write_file(entry, bad);
    recompile_and_check("checksum mismatch");
  }
  SECTION("an entry from an older format version") {
    write_file(entry, jit::disk_cache::serialize(first.key, *first, jit::cache_format_version - 1));
    recompile_and_check("format version 0");
  }
  SECTION("another key's entry under this key's name") {
    write_file(entry, jit::disk_cache::serialize({1, 2}, *first));
    recompile_and_check("another key");
  }
}

// Run by the race test in two child processes at once: waits for the start file, then compiles.
TEST_CASE("jit race child", "[.jit_race_child]") {
  CUASYNC_CHILD_ONLY();
  const char* dir = std::getenv("CUASYNC_TEST_RACE_DIR");
  REQUIRE(dir);
  const fs::path go = fs::path(dir) / "go";
  while (!fs::exists(go)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  jit::compiler c(settings(fs::path(dir) / "cache"));
  const auto r = c.compile(test::templates_program(), {jit::output_kind::cubin, 90});
  std::printf("RACE %s %zu bytes, lowered %s\n", jit::to_string(r.outcome), r->image.size(),
              r->lowered_name("saxpy<float, 256>").c_str());
  CHECK(!r->image.empty());
}

TEST_CASE("two processes compiling the same kernel at once both succeed and leave one valid entry",
          "[jit][cache][processes]") {
  scratch_dir dir;
  fs::create_directories(dir.path);
  const std::vector<std::string> env{"CUASYNC_TEST_RACE_DIR=" + dir.path.string()};
  test::child_result results[2];
  std::thread children[2];
  for (int i = 0; i < 2; ++i)
    children[i] = std::thread([&, i] { results[i] = test::run_child({"jit race child", "--success"}, env); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both started and waiting
  write_file(dir.path / "go", "");
  for (auto& t : children) t.join();
  for (const auto& r : results) {
    INFO(r.output);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.output, Catch::Contains("RACE ") && Catch::Contains("lowered _Z5saxpyIfLi256EEvT_PKS0_PS0_i"));
  }
  const auto files = entries(dir.cache());
  CHECK(files.size() == 1);
  CHECK(temp_files(dir.cache()) == 0);
  jit::disk_cache cache(dir.cache());
  const auto key = jit::make_cache_key(test::templates_program(), {jit::output_kind::cubin, 90}, {},
                                       jit::nvrtc_library());
  const auto loaded = cache.load(key);
  REQUIRE(loaded);
  CHECK(loaded->lowered_name("ns::reduce<double>").starts_with("_ZN2ns6reduce"));
  CHECK(cache.stats().rejected == 0);
}

TEST_CASE("the cache directory is created 0700 and checked", "[jit][cache][security]") {
  scratch_dir dir;
  SECTION("created 0700") {
    jit::disk_cache cache(dir.cache());
    struct stat st {};
    REQUIRE(::stat(dir.cache().c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0700);
    CHECK(st.st_uid == ::geteuid());
  }
  SECTION("a world-writable directory is refused") {
    fs::create_directories(dir.cache());
    ::chmod(dir.cache().c_str(), 0777);
    CHECK_THROWS_AS(jit::disk_cache(dir.cache()), jit::cache_error);
    CHECK_THROWS_WITH(jit::disk_cache(dir.cache()), Catch::Contains("writable by every user (mode 0777)") &&
                                                        Catch::Contains("chmod 700"));
    CHECK_THROWS_AS(jit::compiler(settings(dir.cache())), jit::cache_error);
  }
  SECTION("a group-writable directory is refused") {
    fs::create_directories(dir.cache());
    ::chmod(dir.cache().c_str(), 0770);
    CHECK_THROWS_WITH(jit::disk_cache(dir.cache()), Catch::Contains("writable by its group"));
    // The error names the line that opened the cache, directly or through a compiler.
    test::check_call_site(test::error_of([&] { jit::disk_cache{dir.cache()}; }));
    test::check_call_site(test::error_of([&] { jit::compiler{settings(dir.cache())}; }));
  }
  SECTION("a directory owned by another user is refused") {
    fs::path other;
    if (::geteuid() == 0) {  // root: make one that belongs to nobody
      fs::create_directories(dir.cache());
      ::chmod(dir.cache().c_str(), 0700);
      REQUIRE(::chown(dir.cache().c_str(), 65534, 65534) == 0);
      other = dir.cache();
    } else {
      other = "/";  // owned by root, not by this user
    }
    CHECK_THROWS_AS(jit::disk_cache(other), jit::cache_error);
    CHECK_THROWS_WITH(jit::disk_cache(other),
                      Catch::Contains("owned by another user") && Catch::Contains("CUASYNC_CACHE_DIR"));
  }
  SECTION("a file is not a directory") {
    fs::create_directories(dir.path);
    write_file(dir.cache(), "x");
    CHECK_THROWS_WITH(jit::disk_cache(dir.cache()), Catch::Contains("not a directory"));
  }
}

TEST_CASE("least recently used entries are evicted under a tiny cap", "[jit][cache][eviction]") {
  scratch_dir dir;
  const std::string one = jit::disk_cache::serialize({1, 0}, fake_program(1, 1000));
  jit::disk_cache cache(dir.cache(), one.size() * 5 / 2);  // room for two entries
  const jit::cache_key a{1, 0}, b{2, 0}, c{3, 0};
  cache.store(a, fake_program(1, 1000));
  cache.store(b, fake_program(2, 1000));
  CHECK(cache.stats().evictions == 0);
  REQUIRE(cache.load(a));  // a is now more recently used than b
  cache.store(c, fake_program(3, 1000));
  CHECK(cache.stats().evictions == 1);
  CHECK(fs::exists(cache.entry_path(a)));
  CHECK(!fs::exists(cache.entry_path(b)));
  CHECK(fs::exists(cache.entry_path(c)));
  CHECK(cache.size_bytes() <= cache.max_bytes());
  CHECK(!cache.load(b));
  const auto loaded_c = cache.load(c);
  REQUIRE(loaded_c);
  CHECK(loaded_c->image == fake_program(3, 1000).image);
  CHECK(cache.stats().hits == 2);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.evict_to(0) == 2);  // everything
  CHECK(entries(dir.cache()).empty());
}

TEST_CASE("the environment turns the disk cache off, relocates and caps it", "[jit][cache][env]") {
  struct saved_env {
    std::vector<std::pair<std::string, std::optional<std::string>>> vars;
    explicit saved_env(std::initializer_list<const char*> names) {
      for (const char* n : names) {
        const char* v = std::getenv(n);
        vars.emplace_back(n, v ? std::optional<std::string>(v) : std::nullopt);
      }
    }
    ~saved_env() {
      for (auto& [n, v] : vars)
        if (v)
          ::setenv(n.c_str(), v->c_str(), 1);
        else
          ::unsetenv(n.c_str());
    }
  } saved{"CUASYNC_CACHE", "CUASYNC_CACHE_DIR", "CUASYNC_CACHE_SIZE", "XDG_CACHE_HOME", "HOME"};
  ::unsetenv("CUASYNC_CACHE");
  ::unsetenv("CUASYNC_CACHE_DIR");
  ::unsetenv("CUASYNC_CACHE_SIZE");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/someone", 1);
  auto s = jit::disk_cache_settings::from_environment();
  CHECK(s.enabled);
  CHECK(s.directory == "/home/someone/.cache/cuasync/jit");
  CHECK(s.max_bytes == std::uint64_t{1} << 30);
  ::setenv("CUASYNC_CACHE_DIR", "/var/tmp/mine", 1);
  ::setenv("CUASYNC_CACHE_SIZE", "64M", 1);
  s = jit::disk_cache_settings::from_environment();
  CHECK(s.directory == "/var/tmp/mine");
  CHECK(s.max_bytes == std::uint64_t{64} << 20);
  ::setenv("CUASYNC_CACHE", "0", 1);
  CHECK(!jit::disk_cache_settings::from_environment().enabled);
  jit::compiler off(jit::disk_cache_settings::from_environment());
  CHECK(off.disk() == nullptr);
  ::setenv("CUASYNC_CACHE_SIZE", "lots", 1);
  CHECK_THROWS_WITH(jit::disk_cache_settings::from_environment(), Catch::Contains("CUASYNC_CACHE_SIZE='lots'"));
  ::setenv("CUASYNC_CACHE_SIZE", "-5", 1);  // stoull's 2^64 - 5
  CHECK_THROWS_WITH(jit::disk_cache_settings::from_environment(), Catch::Contains("negative"));
  ::setenv("CUASYNC_CACHE_SIZE", "17179869184G", 1);  // 2^64: would wrap to 0 and evict every entry
  CHECK_THROWS_WITH(jit::disk_cache_settings::from_environment(), Catch::Contains("larger than any disk"));
  test::check_call_site(test::error_of([] { jit::disk_cache_settings::from_environment(); }));
  test::check_call_site(test::error_of([] { jit::compiler{}; }));  // reads the environment at the caller's line
}
