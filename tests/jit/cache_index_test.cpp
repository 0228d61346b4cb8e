// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The disk cache's index: each store appends a record that reads back; a corrupt, torn or foreign line is skipped
// alone; a key stored again is one record; compaction drops bad, superseded and stale lines and never one whose entry
// exists; appends racing with compactions all land. And compiler::preload: an entry read by its key alone, so that a
// later compile of its program is a memory hit.
#include <cuasync/jit/cache_index.hpp>

#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/disk_cache.hpp>

#include <catch2/catch.hpp>

#include "kernels.hpp"
#include "scratch.hpp"

#include <sys/stat.h>

#include <atomic>
#include <set>
#include <thread>

using namespace cuasync;
namespace fs = std::filesystem;

namespace {

struct scratch_dir : test::scratch_cache {
  fs::path index() const { return cache() / jit::cache_index_file_name; }
};

// A synthetic entry: no NVRTC needed.
jit::compiled_program fake(std::string name, jit::target t = {jit::output_kind::ptx, 90}) {
  jit::compiled_program p;
  p.name = std::move(name);
  p.target = t;
  p.image.assign(100, std::byte{7});
  p.nvrtc_version = 13000;
  return p;
}

// "k3.cu" (built by appending: g++ 12 warns, wrongly, about "k" + std::to_string(i))
std::string kname(int i) {
  std::string n = "k";
  n += std::to_string(i);
  n += ".cu";
  return n;
}

jit::cache_key key(std::uint64_t i) { return {i * 0x9e3779b97f4a7c15ull, ~i}; }

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto end = text.find('\n', pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end == std::string::npos ? text.size() : end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("each store appends an index record that reads back", "[jit][cache][index]") {
  scratch_dir dir;
  jit::disk_cache cache(dir.cache());
  cache.store(key(1), fake("a.cu"));
  cache.store(key(2), fake("with space, 100% <T>", {jit::output_kind::cubin, 120}));
  cache.store(key(3), fake("", {jit::output_kind::ltoir, 80}));
  struct stat st {};
  REQUIRE(::stat(dir.index().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK_THAT(test::read_file(dir.index()), Catch::StartsWith("cuasync cache-index 1\n"));

  const auto c = jit::read_cache_index(dir.cache());
  CHECK(c.lines == 3);
  CHECK(c.bad_lines == 0);
  REQUIRE(c.records.size() == 3);
  CHECK(c.records[0].key == key(1));
  CHECK(c.records[0].name == "a.cu");
  CHECK(c.records[0].target == jit::target{jit::output_kind::ptx, 90});
  CHECK(c.records[0].nvrtc_version == 13000);
  CHECK(c.records[0].bytes == fs::file_size(cache.entry_path(key(1))));
  CHECK(c.records[1].name == "with space, 100% <T>");
  CHECK(c.records[1].target == jit::target{jit::output_kind::cubin, 120});
  CHECK(c.records[2].name.empty());
  CHECK(c.records[2].target == jit::target{jit::output_kind::ltoir, 80});
  CHECK(cache.stats().index_failures == 0);
}

TEST_CASE("a corrupt, torn or foreign index line is skipped alone", "[jit][cache][index]") {
  scratch_dir dir;
  jit::disk_cache cache(dir.cache());
  for (int i = 1; i <= 4; ++i) cache.store(key(i), fake(kname(i)));
  const std::string good = test::read_file(dir.index());
  auto l = lines(good);
  REQUIRE(l.size() == 5);

  SECTION("a changed byte in one record") {
    l[2][40] = l[2][40] == '9' ? '8' : '9';  // inside the record's fields: its check no longer matches
    std::string text;
    for (const auto& x : l) text += x + "\n";
    test::write_file(dir.index(), text);
    const auto c = jit::read_cache_index(dir.cache());
    CHECK(c.bad_lines == 1);
    REQUIRE(c.records.size() == 3);
    CHECK(c.records[0].key == key(1));
    CHECK(c.records[1].key == key(3));
    CHECK(c.records[2].key == key(4));
  }
  SECTION("a torn last line, and garbage") {
    const std::string line5 = jit::detail::format_index_line({key(5), {jit::output_kind::ptx, 90}, 13000, 1, "k5"});
    test::write_file(dir.index(), good + "not a record\n" + line5.substr(0, line5.size() / 2));
    const auto c = jit::read_cache_index(dir.cache());
    CHECK(c.bad_lines == 2);
    CHECK(c.records.size() == 4);
    // The next appends start on lines of their own.
    cache.store(key(6), fake("k6.cu"));
    cache.store(key(7), fake("k7.cu"));
    const auto after = jit::read_cache_index(dir.cache());
    CHECK(after.bad_lines == 2);
    CHECK(after.records.size() == 6);
    CHECK(after.records.back().key == key(7));
  }
  SECTION("another format's header: nothing is trusted") {
    std::string foreign = "cuasync cache-index 2\n";
    foreign += good.substr(good.find('\n') + 1);
    test::write_file(dir.index(), foreign);
    const auto c = jit::read_cache_index(dir.cache());
    CHECK(c.records.empty());
    CHECK(c.bad_lines == 5);
  }
  SECTION("no index at all") {
    fs::remove(dir.index());
    const auto c = jit::read_cache_index(dir.cache());
    CHECK(c.records.empty());
    CHECK(c.lines == 0);
  }
}

TEST_CASE("a key stored again is one index record; compaction keeps exactly the live ones", "[jit][cache][index]") {
  scratch_dir dir;
  jit::disk_cache cache(dir.cache());
  for (int i = 1; i <= 5; ++i) cache.store(key(i), fake(kname(i)));
  cache.store(key(2), fake("k2 again.cu"));
  test::write_file(dir.index(), test::read_file(dir.index()) + "garbage\n");
  fs::remove(cache.entry_path(key(4)));  // evicted: its record is stale
  auto c = jit::read_cache_index(dir.cache());
  CHECK(c.lines == 7);
  CHECK(c.duplicates == 1);
  CHECK(c.bad_lines == 1);
  REQUIRE(c.records.size() == 5);
  CHECK(c.records[1].name == "k2 again.cu");  // the later record, at the first one's place

  CHECK(jit::compact_cache_index(dir.cache()) == 3);  // the duplicate, the garbage, the stale record
  c = jit::read_cache_index(dir.cache());
  CHECK(c.lines == 4);
  CHECK(c.bad_lines == 0);
  CHECK(c.duplicates == 0);
  std::vector<std::string> names;
  for (const auto& r : c.records) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"k1.cu", "k2 again.cu", "k3.cu", "k5.cu"});
  CHECK(jit::compact_cache_index(dir.cache()) == 0);  // nothing left to remove: not rewritten
  struct stat st {};
  REQUIRE(::stat(dir.index().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("index appends racing with compactions all land", "[jit][cache][index]") {
  scratch_dir dir;
  jit::disk_cache cache(dir.cache());
  constexpr int threads = 4, per_thread = 60;
  std::atomic<bool> stop{false};
  std::atomic<int> compactions{0};
  std::thread compactor([&] {
    while (!stop) {
      jit::compact_cache_index(dir.cache());
      ++compactions;
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < threads; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) cache.store(key(t * 1000 + i + 1), fake("w.cu"));
    });
  for (auto& w : writers) w.join();
  stop = true;
  compactor.join();
  CHECK(compactions > 0);
  CHECK(cache.stats().index_failures == 0);
  const auto c = jit::read_cache_index(dir.cache());
  CHECK(c.bad_lines == 0);
  std::set<std::uint64_t> seen;
  for (const auto& r : c.records) seen.insert(r.key.low);
  CHECK(seen.size() == threads * per_thread);
  for (int t = 0; t < threads; ++t)
    for (int i = 0; i < per_thread; ++i) CHECK(seen.count(key(t * 1000 + i + 1).low) == 1);
}

TEST_CASE("preload reads an entry by its key; the program's compile is then a memory hit", "[jit][cache][index]") {
  scratch_dir dir;
  const jit::program p = test::small_program(41);
  const jit::target t{jit::output_kind::ptx, 90};
  jit::cache_key k;
  {
    jit::compiler first(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
    k = first.compile(p, t).key;
  }
  const auto index = jit::read_cache_index(dir.cache());
  REQUIRE(index.records.size() == 1);
  CHECK(index.records[0].key == k);
  CHECK(index.records[0].name == p.name());

  jit::compiler c(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
  const jit::preload_result r = c.preload(k);
  CHECK(r.outcome == jit::preload_outcome::loaded);
  REQUIRE(r.result.program);
  CHECK(r.result.outcome == jit::cache_outcome::disk_hit);
  CHECK(c.preload(k).outcome == jit::preload_outcome::in_memory);
  const jit::compile_result again = c.compile(p, t);
  CHECK(again.outcome == jit::cache_outcome::memory_hit);
  CHECK(again.program == r.result.program);  // the very object preload put there
  const auto s = c.stats();
  CHECK(s.preloads == 1);
  CHECK(s.compiles == 0);
  CHECK(s.memory_hits == 1);

  CHECK(c.preload(jit::cache_key{1, 2}).outcome == jit::preload_outcome::not_on_disk);
  // A bad entry is rejected, deleted, and says why.
  jit::compiler other(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
  std::string bytes = test::read_file(other.disk()->entry_path(k));
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  test::write_file(other.disk()->entry_path(k), bytes);
  const jit::preload_result bad = other.preload(k);
  CHECK(bad.outcome == jit::preload_outcome::rejected);
  CHECK_FALSE(bad.rejection.empty());
  CHECK_FALSE(bad.result.program);
  CHECK_FALSE(fs::exists(other.disk()->entry_path(k)));
  CHECK(other.stats().preloads == 0);
}
