// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The nvrtc-identity record: a disk hit in a fresh process does not load NVRTC; a changed loader fingerprint, a
// changed library, a corrupt record or a record naming another NVRTC all end in NVRTC being loaded, with the right
// result. Each "process" is this test binary re-executed with a hidden test case (never fork).
#include <cuasync/jit/nvrtc_identity.hpp>

#include <cuasync/jit/compiler.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "kernels.hpp"
#include "scratch.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>

using namespace cuasync;
namespace fs = std::filesystem;

namespace {

using test::read_file;
using test::write_file;

struct scratch_dir : test::scratch_dir {
  scratch_dir() { fs::create_directories(path); }
  fs::path identity() const { return cache() / jit::nvrtc_identity_file_name; }
};

bool nvrtc_in_maps() {
  return read_file("/proc/self/maps").find("libnvrtc") != std::string::npos;
}

// What one child process reported: "IDENTITY key=value ..." parsed.
struct child_report {
  std::map<std::string, std::string> fields;
  std::string output;
  const std::string& operator[](const std::string& k) const {
    static const std::string none = "<missing>";
    auto it = fields.find(k);
    return it == fields.end() ? none : it->second;
  }
};

// Runs the child case with the cache in `cache`, plus `env` ("NAME=value", set through env(1) so that a variable
// the parent has is replaced, not duplicated).
child_report run_compile_child(const fs::path& cache, std::vector<std::string> env = {}) {
  std::vector<std::string> args{"CUASYNC_TEST_IDENTITY_CACHE=" + cache.string()};
  args.insert(args.end(), env.begin(), env.end());
  args.insert(args.end(), {test::self_path(), "jit identity child", "--success"});
  const auto r = test::run_child(args, {}, std::chrono::seconds(120), "/usr/bin/env");
  child_report out;
  out.output = r.output;
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  const auto pos = r.output.find("IDENTITY ");
  REQUIRE(pos != std::string::npos);
  std::string line = r.output.substr(pos + 9, r.output.find('\n', pos) - pos - 9);
  for (std::size_t i = 0; i < line.size();) {
    const auto space = line.find(' ', i);
    const std::string kv = line.substr(i, space == std::string::npos ? std::string::npos : space - i);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) out.fields[kv.substr(0, eq)] = kv.substr(eq + 1);
    if (space == std::string::npos) break;
    i = space + 1;
  }
  return out;
}

const std::string saxpy_lowered = "_Z5saxpyIfLi256EEvT_PKS0_PS0_i";

}  // namespace

// The child: compiles the templates program for compute capability 9.0 through a compiler on the given cache and
// says where the result came from, whether NVRTC was loaded (the library's flag and /proc/self/maps), and what it got.
TEST_CASE("jit identity child", "[.jit_identity_child]") {
  CUASYNC_CHILD_ONLY();
  const char* cache = std::getenv("CUASYNC_TEST_IDENTITY_CACHE");
  REQUIRE(cache);
  jit::compiler c(jit::disk_cache_settings{true, cache, std::uint64_t{1} << 30});
  const auto r = c.compile(test::templates_program(), 90);
  const auto s = c.stats();
  std::printf("IDENTITY outcome=%s loaded=%d maps=%d records=%llu mismatches=%llu target=%s image=%s lowered=%s\n",
              r.outcome == jit::cache_outcome::disk_hit ? "disk_hit" : jit::to_string(r.outcome),
              jit::nvrtc_loaded() ? 1 : 0, nvrtc_in_maps() ? 1 : 0,
              static_cast<unsigned long long>(s.identity_records),
              static_cast<unsigned long long>(s.identity_mismatches), r->target.architecture().c_str(),
              jit::checksum(r->image.data(), r->image.size()).hex().c_str(),
              r->lowered_name("saxpy<float, 256>").c_str());
}

TEST_CASE("a disk hit in a fresh process does not load NVRTC", "[jit][cache][identity][processes]") {
  scratch_dir dir;
  const auto miss = run_compile_child(dir.cache());
  INFO(miss.output);
  CHECK(miss["outcome"] == "miss");
  CHECK(miss["loaded"] == "1");
  CHECK(miss["maps"] == "1");
  CHECK(miss["records"] == "1");
  CHECK(miss["lowered"] == saxpy_lowered);
  REQUIRE(fs::exists(dir.identity()));
  struct stat st {};
  REQUIRE(::stat(dir.identity().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // The record names the library this process loads, with its version and architectures.
  const auto& nvrtc = jit::nvrtc_library();
  const std::string text = read_file(dir.identity());
  CHECK_THAT(text, Catch::Contains(" " + std::to_string(nvrtc.major) + " " + std::to_string(nvrtc.minor) + " ") &&
                       Catch::Contains(" " + nvrtc.library + "\n") && Catch::StartsWith("cuasync nvrtc-identity 1\n"));

  for (int i = 0; i < 2; ++i) {
    const auto hit = run_compile_child(dir.cache());
    INFO(hit.output);
    CHECK(hit["outcome"] == "disk_hit");
    CHECK(hit["loaded"] == "0");
    CHECK(hit["maps"] == "0");
    CHECK(hit["records"] == "0");
    CHECK(hit["target"] == miss["target"]);
    CHECK(hit["image"] == miss["image"]);
    CHECK(hit["lowered"] == saxpy_lowered);
  }
  CHECK(read_file(dir.identity()) == text);  // a hit writes nothing
}

TEST_CASE("a changed loader fingerprint or library loads NVRTC, with the same result", "[jit][cache][identity][processes]") {
  scratch_dir dir;
  const auto first = run_compile_child(dir.cache());
  REQUIRE(first["outcome"] == "miss");

  SECTION("another LD_LIBRARY_PATH") {
    const fs::path elsewhere = dir.path / "lib";
    fs::create_directories(elsewhere);
    const std::string ld = "LD_LIBRARY_PATH=" + elsewhere.string();
    const auto other = run_compile_child(dir.cache(), {ld});
    INFO(other.output);
    CHECK(other["outcome"] == "disk_hit");  // the same NVRTC: the same key
    CHECK(other["loaded"] == "1");
    CHECK(other["records"] == "1");         // a second record, for this fingerprint
    CHECK(other["image"] == first["image"]);
    // Both fingerprints are remembered now.
    CHECK(run_compile_child(dir.cache(), {ld})["loaded"] == "0");
    CHECK(run_compile_child(dir.cache())["loaded"] == "0");
    // A file added to a directory the loader searches changes the fingerprint, though the variable did not change.
    write_file(elsewhere / "libsomething.so", "x");
    const auto added = run_compile_child(dir.cache(), {ld});
    INFO(added.output);
    CHECK(added["loaded"] == "1");
    CHECK(added["image"] == first["image"]);
  }
  SECTION("CUASYNC_LIBNVRTC naming a library file that then changes") {
    const fs::path copy = dir.path / "libnvrtc.so.13";
    fs::copy_file(jit::nvrtc_library().library, copy);
    const std::string env = "CUASYNC_LIBNVRTC=" + copy.string();
    const auto loaded = run_compile_child(dir.cache(), {env});
    INFO(loaded.output);
    CHECK(loaded["loaded"] == "1");
    CHECK(loaded["records"] == "1");
    CHECK(loaded["lowered"] == saxpy_lowered);
    const auto hit = run_compile_child(dir.cache(), {env});
    CHECK(hit["outcome"] == "disk_hit");
    CHECK(hit["loaded"] == "0");
    CHECK(hit["image"] == loaded["image"]);
    // The file changes (as an upgrade in place would): the record no longer vouches for it.
    const timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, copy.c_str(), times, 0) == 0);
    const auto changed = run_compile_child(dir.cache(), {env});
    INFO(changed.output);
    CHECK(changed["outcome"] == "disk_hit");
    CHECK(changed["loaded"] == "1");
    CHECK(changed["records"] == "1");  // recorded again, with the new stat
    CHECK(changed["image"] == loaded["image"]);
    CHECK(run_compile_child(dir.cache(), {env})["loaded"] == "0");
  }
}

TEST_CASE("a corrupt or lying nvrtc-identity file is not trusted", "[jit][cache][identity][processes]") {
  scratch_dir dir;
  const auto first = run_compile_child(dir.cache());
  REQUIRE(first["outcome"] == "miss");
  const std::string good = read_file(dir.identity());
  REQUIRE(good.size() > 60);

  auto check_loaded_and_rewritten = [&] {
    const auto r = run_compile_child(dir.cache());
    INFO(r.output);
    CHECK(r["outcome"] == "disk_hit");
    CHECK(r["loaded"] == "1");
    CHECK(r["records"] == "1");
    CHECK(r["image"] == first["image"]);
    CHECK(read_file(dir.identity()) == good);  // rewritten whole
    CHECK(run_compile_child(dir.cache())["loaded"] == "0");
  };
  SECTION("a flipped byte") {
    std::string bad = good;
    bad[40] ^= 0x01;
    write_file(dir.identity(), bad);
    check_loaded_and_rewritten();
  }
  SECTION("truncated") {
    write_file(dir.identity(), good.substr(0, good.size() - 10));
    check_loaded_and_rewritten();
  }
  SECTION("empty") {
    write_file(dir.identity(), "");
    check_loaded_and_rewritten();
  }
  SECTION("a symbolic link is not followed") {
    fs::remove(dir.identity());
    write_file(dir.path / "elsewhere", good);
    fs::create_symlink(dir.path / "elsewhere", dir.identity());
    const auto r = run_compile_child(dir.cache());
    CHECK(r["loaded"] == "1");
  }
  // A record that vouches for the real library's path and stat but claims `version` and `archs`: believed until
  // NVRTC is loaded for a miss. This process's fingerprint is the child's (same executable and environment).
  auto write_lying_record = [&](const std::string& version, const std::string& archs) {
    const auto& nvrtc = jit::nvrtc_library();
    std::optional<std::string> libnvrtc_env;
    if (const char* v = std::getenv("CUASYNC_LIBNVRTC"); v && *v) libnvrtc_env = v;
    struct stat st {};
    REQUIRE(::stat(nvrtc.library.c_str(), &st) == 0);
    std::string body = "cuasync nvrtc-identity 1\n" + jit::nvrtc_loader_fingerprint(libnvrtc_env).hex() + " " +
                       version + " " + std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " +
                       std::to_string(st.st_size) + " " +
                       std::to_string(std::int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec) + " " +
                       std::to_string(std::int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec) + " " +
                       archs + " " + nvrtc.library + "\n";
    body += "checksum " + jit::checksum(body.data(), body.size()).hex() + "\n";
    write_file(dir.identity(), body);
  };
  SECTION("a record naming another NVRTC version: the miss it causes finds out, records the truth, keys again") {
    write_lying_record("12 9", "50,60,70,80,90");
    const auto r = run_compile_child(dir.cache());
    INFO(r.output);
    CHECK(r["outcome"] == "disk_hit");  // keyed again for the real NVRTC: the entry the first child wrote
    CHECK(r["loaded"] == "1");
    CHECK(r["mismatches"] == "1");
    CHECK(r["records"] == "1");
    CHECK(r["image"] == first["image"]);
    CHECK(read_file(dir.identity()) == good);
    CHECK(run_compile_child(dir.cache())["loaded"] == "0");
  }
  SECTION("a record with other architectures but the same key: the recompile does not wait for itself") {
    write_lying_record(jit::nvrtc_library().version_string().replace(2, 1, " "), "75,80,90");
    for (const auto& e : fs::directory_iterator(dir.cache()))
      if (e.path().extension() == ".jit") fs::remove(e.path());
    const auto r = run_compile_child(dir.cache());
    INFO(r.output);
    CHECK(r["outcome"] == "miss");
    CHECK(r["loaded"] == "1");
    CHECK(r["mismatches"] == "1");
    CHECK(r["target"] == "sm_90");
    CHECK(r["image"] == first["image"]);
    CHECK(read_file(dir.identity()) == good);
  }
}
