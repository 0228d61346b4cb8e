// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Warm start on the simulated driver: a parent compiles programs (PTX, with the real NVRTC) into a cache directory,
// then a fresh child process warm-starts from it and looks the kernels up. The child says what the warm start did,
// whether NVRTC was loaded, how many libraries its own thread loaded, and whether each kernel ran (sim_fill_u32,
// which the simulated driver runs, with a value per program).
#include <cuasync/runtime/warm_start.hpp>

#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/jit/cache_index.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/nvrtc_identity.hpp>

#include <catch2/catch.hpp>

#include "../jit/scratch.hpp"
#include "child_process.hpp"
#include "fill_kernel.hpp"
#include "simulated_driver.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <regex>
#include <sstream>
#include <string>

using namespace cuasync;
namespace fs = std::filesystem;

namespace {

jit::program warm_program(int i) {
  return jit::program("warm/k" + std::to_string(i) + ".cu",
                      "extern \"C\" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned value) {\n"
                      "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                      "  if (i < n) p[i] = value;\n"
                      "}\n// warm start test kernel " + std::to_string(i) + "\n");
}

// What the simulated device (compute capability 9.0) gets for output_request::ptx.
const jit::target sim_ptx{jit::output_kind::ptx, 90};

long libraries_loaded_on_this_thread() { return test::simulated_calls_here("cuLibraryLoadData"); }

bool nvrtc_in_maps() { return test::read_file("/proc/self/maps").find("libnvrtc") != std::string::npos; }

std::vector<int> numbers(const char* list) {
  std::vector<int> out;
  std::stringstream in(list ? list : "");
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(std::stoi(item));
  return out;
}

bool runs(context_ref ctx, kernel_ref k, unsigned value) {
  return test::fill_and_read(ctx, k, value) == std::vector<unsigned>(64, value);
}

// The child's "KEY=value ..." lines, parsed.
struct child_output {
  std::string text;
  std::map<std::string, std::string> fields;
  long operator[](const std::string& k) const {
    auto it = fields.find(k);
    return it == fields.end() ? -999 : std::stol(it->second);
  }
};

child_output run_warm_child(const fs::path& cache, const std::string& lookups, const std::string& early = "") {
  const test::child_result r = test::run_child(
      {"[warm_child]"}, {"CUASYNC_CACHE_DIR=" + cache.string(), "WARM_PREFIX=warm/", "WARM_LOOKUP=" + lookups,
                         "WARM_EARLY=" + early});
  child_output out;
  out.text = r.output;
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  static const std::regex field("(?:^|\\s)([a-z_0-9]+)=(-?[0-9]+)");
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), field); it != std::sregex_iterator(); ++it)
    out.fields[(*it)[1]] = (*it)[2];
  return out;
}

}  // namespace

// The child: a warm start for device 0 with WARM_PREFIX; on this thread meanwhile, other start-up work (a buffer, a
// memset) and the lookups WARM_EARLY; after the warm start, the lookups WARM_LOOKUP, each launched.
TEST_CASE("warm start child", "[.][warm_child]") {
  CUASYNC_CHILD_ONLY();
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  jit::compiler compiler;  // CUASYNC_CACHE_DIR: the parent's directory
  runtime::kernel_cache cache(compiler);
  runtime::warm_start_options o;
  if (const char* prefix = std::getenv("WARM_PREFIX")) o.name_prefix = prefix;
  o.threads = 2;
  runtime::warm_start warm(cache, 0, o);
  // Other start-up work on this thread while the warm start loads.
  primary_context pc = primary_context::retain(0);
  device_buffer scratch = device_buffer::allocate(pc, 1 << 20);
  stream s = stream::create(pc);
  memset_async(s, scratch.span(), 0);
  for (int i : numbers(std::getenv("WARM_EARLY")))
    std::printf("early_%d=%d\n", i,
                runs(pc, cache.shared_kernel(pc, warm_program(i), "sim_fill_u32", {}, jit::output_request::ptx),
                     1000u + i) ? 1 : 0);
  s.synchronize();
  const runtime::warm_start_report& r = warm.wait();
  std::printf("REPORT records=%zu bad_lines=%zu selected=%zu loaded=%zu already=%zu libraries=%zu stale=%zu "
              "rejected=%zu failed=%zu known=%d nvrtc_at_end=%d error_empty=%d\n",
              r.index_records, r.index_bad_lines, r.selected, r.loaded, r.already, r.libraries, r.stale, r.rejected,
              r.failed, r.nvrtc_identity_known ? 1 : 0, r.nvrtc_loaded ? 1 : 0, r.error.empty() ? 1 : 0);
  for (const auto& p : r.problems) std::printf("PROBLEM %s\n", p.c_str());
  if (!r.error.empty()) std::printf("ERROR %s\n", r.error.c_str());
  std::printf("AFTER_WAIT nvrtc=%d maps=%d main_loads=%ld\n", jit::nvrtc_loaded() ? 1 : 0, nvrtc_in_maps() ? 1 : 0,
              libraries_loaded_on_this_thread());
  const jit::compiler_stats before = compiler.stats();
  for (int i : numbers(std::getenv("WARM_LOOKUP"))) {
    const auto c = compiler.compile(warm_program(i), sim_ptx);
    std::printf("lookup_%d=%d outcome_%d=%d\n", i,
                runs(pc, cache.shared_kernel(pc, warm_program(i), "sim_fill_u32", {}, jit::output_request::ptx),
                     1000u + i) ? 1 : 0,
                i, static_cast<int>(c.outcome));
    if (i == 0)  // before any lookup that could need NVRTC (the tests put those last)
      std::printf("after_first nvrtc_first=%d\n", jit::nvrtc_loaded() ? 1 : 0);
  }
  const jit::compiler_stats st = compiler.stats();
  const runtime::kernel_cache_stats ks = cache.stats();
  std::printf("STATS lookup_memory_hits=%llu lookup_disk_hits=%llu compiles=%llu preloads=%llu library_loads=%llu "
              "library_hits=%llu main_loads_end=%ld\n",
              static_cast<unsigned long long>(st.memory_hits - before.memory_hits),
              static_cast<unsigned long long>(st.disk.hits - before.disk.hits),
              static_cast<unsigned long long>(st.compiles), static_cast<unsigned long long>(st.preloads),
              static_cast<unsigned long long>(ks.library_loads), static_cast<unsigned long long>(ks.library_hits),
              libraries_loaded_on_this_thread());
}

TEST_CASE("a warm start loads the device's indexed kernels without NVRTC, off the caller's thread",
          "[.simulated][warm_start]") {
  CUASYNC_SIMULATED_ONLY();
  test::scratch_dir dir;
  {
    jit::compiler parent(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
    for (int i = 0; i < 6; ++i) parent.compile(warm_program(i), sim_ptx);
    parent.compile(jit::program("other/x.cu", "extern \"C\" __global__ void sim_fill_u32() {}\n"), sim_ptx);
    jit::compiled_program elsewhere;  // another device's CUBIN: not for this one
    elsewhere.name = "warm/elsewhere.cu";
    elsewhere.target = {jit::output_kind::cubin, 120};
    elsewhere.image.assign(64, std::byte{0x7f});
    elsewhere.nvrtc_version = jit::nvrtc_library().version();
    parent.disk()->store(jit::cache_key{1, 2}, elsewhere);
  }
  REQUIRE(jit::read_cache_index(dir.cache()).records.size() == 8);
  // Lookups of every kernel after the warm start; kernel 0 also looked up (and run) while it loads.
  const child_output c = run_warm_child(dir.cache(), "0,1,2,3,4,5", "0");
  INFO(c.text);
  CHECK(c["error_empty"] == 1);
  CHECK(c["records"] == 8);
  CHECK(c["selected"] == 6);  // not other/, not the sm_120 CUBIN
  CHECK(c["known"] == 1);
  CHECK(c["loaded"] + c["already"] == 6);
  // Six libraries, but for kernel 0 when this thread's own lookup was loading it as the warm start came to it (the
  // warm start then leaves it: "busy", counted as already).
  CHECK((c["libraries"] == 6 || (c["libraries"] == 5 && c["main_loads"] == 1)));
  CHECK(c["stale"] == 0);
  CHECK(c["rejected"] == 0);
  CHECK(c["failed"] == 0);
  CHECK(c["nvrtc_at_end"] == 0);
  CHECK(c["early_0"] == 1);
  // No NVRTC anywhere on the warm path, and the libraries loaded on the warm start's threads (this thread loads at
  // most the one it looked up itself, when it got there first).
  CHECK(c["nvrtc"] == 0);
  CHECK(c["maps"] == 0);
  CHECK(c["main_loads"] <= 1);
  for (int i = 0; i < 6; ++i) {
    CHECK(c["lookup_" + std::to_string(i)] == 1);
    CHECK(c["outcome_" + std::to_string(i)] == static_cast<int>(jit::cache_outcome::memory_hit));
  }
  // After it: every compile a memory hit (the shared_kernel lookups' and the direct ones), no disk read, no NVRTC,
  // every library a hit.
  CHECK(c["lookup_memory_hits"] == 12);
  CHECK(c["lookup_disk_hits"] == 0);
  CHECK(c["compiles"] == 0);
  CHECK(c["library_loads"] == 6);
  CHECK(c["main_loads_end"] == c["main_loads"]);
  CHECK(c.text.find("AFTER_WAIT nvrtc=0 maps=0") != std::string::npos);
}

TEST_CASE("a warm start skips and reports corrupt, stale and unloadable entries, and never loads them",
          "[.simulated][warm_start]") {
  CUASYNC_SIMULATED_ONLY();
  test::scratch_dir dir;
  std::vector<fs::path> entry(5);
  {
    jit::compiler parent(jit::disk_cache_settings{true, dir.cache(), std::uint64_t{1} << 30});
    jit::compile_result first;
    for (int i = 0; i < 5; ++i) {
      const auto r = parent.compile(warm_program(i), sim_ptx);
      entry[static_cast<std::size_t>(i)] = parent.disk()->entry_path(r.key);
      if (i == 0) first = r;
      if (i == 4)  // a later record for entry 4 that disagrees with it
        jit::append_cache_index(dir.cache(), {r.key, {jit::output_kind::cubin, 90}, r->nvrtc_version, 1, r->name});
    }
    // A PTX newer than the simulated driver (CUDA 13.0, PTX ISA 9.0) can JIT.
    jit::compiled_program too_new = *first;
    too_new.name = "warm/too-new.cu";
    std::string text(too_new.text());
    text = std::regex_replace(text, std::regex("\\.version [0-9]+\\.[0-9]+"), ".version 9.9",
                              std::regex_constants::format_first_only);
    too_new.image.assign(reinterpret_cast<const std::byte*>(text.data()),
                         reinterpret_cast<const std::byte*>(text.data() + text.size()));
    parent.disk()->store(jit::cache_key{5, 6}, too_new);
  }
  std::string bytes = test::read_file(entry[1]);  // a flipped byte in entry 1
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x20);
  test::write_file(entry[1], bytes);
  fs::remove(entry[2]);  // entry 2 evicted
  test::write_file(dir.cache() / jit::cache_index_file_name,
                   test::read_file(dir.cache() / jit::cache_index_file_name) + "not a record\n");

  // Kernel 1 looked up last: its entry is gone, so that lookup compiles (and loads NVRTC).
  const child_output c = run_warm_child(dir.cache(), "0,3,4,1");
  INFO(c.text);
  CHECK(c["error_empty"] == 1);
  CHECK(c["bad_lines"] == 1);
  CHECK(c["records"] == 6);   // entries 0-4 (4's later record) and the PTX too new
  CHECK(c["selected"] == 6);
  CHECK(c["stale"] == 1);     // entry 2
  CHECK(c["rejected"] == 1);  // entry 1
  CHECK(c["loaded"] == 4);    // 0, 3, 4, the PTX too new
  CHECK(c["libraries"] == 2);  // 0, 3
  CHECK(c["failed"] == 2);     // 4 (its record disagrees), the PTX too new
  CHECK(c["nvrtc_at_end"] == 0);
  CHECK_THAT(c.text, Catch::Contains("warm/k1.cu") && Catch::Contains("rejected") &&
                         Catch::Contains("warm/k2.cu") && Catch::Contains("no entry") &&
                         Catch::Contains("PTX ISA 9.9") && Catch::Contains("the index says CUBIN sm_90"));
  CHECK(c.text.find("AFTER_WAIT nvrtc=0 maps=0") != std::string::npos);
  CHECK(c["main_loads"] == 0);  // no lookup before the warm start ended: every library loaded on its threads
  CHECK(c["nvrtc_first"] == 0);
  for (int i : {0, 3, 4, 1}) CHECK(c["lookup_" + std::to_string(i)] == 1);
  CHECK(c["outcome_4"] == static_cast<int>(jit::cache_outcome::memory_hit));  // in memory; its library loaded now
  CHECK(c["outcome_1"] == static_cast<int>(jit::cache_outcome::miss));        // rejected, deleted: compiled again
  CHECK(c["compiles"] == 1);
  CHECK(c["library_loads"] == 4);  // 0 and 3 by the warm start, 4 and 1 by the lookups

  // Without an NVRTC identity the version is unknown: the device's targets are still chosen, nothing is loaded
  // that the driver refuses, and NVRTC is still not loaded.
  fs::remove(dir.cache() / jit::nvrtc_identity_file_name);
  const child_output unknown = run_warm_child(dir.cache(), "");
  INFO(unknown.text);
  CHECK(unknown["known"] == 0);
  CHECK(unknown["selected"] == 6);  // 0, 1 (stored again), 2 (still stale), 3, 4, the PTX too new
  CHECK(unknown["stale"] == 1);
  CHECK(unknown["libraries"] == 3);
  CHECK(unknown["failed"] == 2);
  CHECK(unknown["nvrtc_at_end"] == 0);
  CHECK(unknown.text.find("AFTER_WAIT nvrtc=0 maps=0") != std::string::npos);
}
