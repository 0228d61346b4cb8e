// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Cache keys at scale: every input that changes a compile's output gives its own key, and the same inputs the same key
// — a header's contents under one name (a key of names alone serves stale code: sirius-db#1863), each option, another
// NVRTC (version or library), each template name expression (a key that never matches them never hits: cupy#10173) —
// each checked on the key and, where it matters, end to end through a compiler's memory and disk caches.
#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/kernel_package.hpp>

#include <catch2/catch.hpp>

#include "kernels.hpp"
#include "scratch.hpp"

#include <functional>
#include <string>
#include <utility>
#include <vector>

using namespace cuasync;
namespace fs = std::filesystem;

namespace {

const jit::target sm90{jit::output_kind::cubin, 90};

jit::nvrtc_info nvrtc(int major, int minor, std::string library) {
  jit::nvrtc_info n;
  n.major = major;
  n.minor = minor;
  n.supported_archs = {75, 80, 90};
  n.library = std::move(library);
  return n;
}
const jit::nvrtc_info nvrtc_13 = nvrtc(13, 0, "/usr/local/cuda-13.0/lib64/libnvrtc.so.13");

// Options that need nothing found at run time (no toolkit include directories).
jit::compile_options plain() {
  jit::compile_options o;
  o.toolkit_includes = false;
  return o;
}

jit::cache_key key(const jit::program& p, const jit::compile_options& o = plain(),
                   const jit::nvrtc_info& n = nvrtc_13, const jit::target& t = sm90) {
  return jit::make_cache_key(p, t, o, n);
}

// Each key differs from every other: no two inputs of the list collide.
void check_all_distinct(const std::vector<std::pair<std::string, jit::cache_key>>& keys) {
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = i + 1; j < keys.size(); ++j) {
      INFO(keys[i].first << " vs " << keys[j].first);
      CHECK(keys[i].second != keys[j].second);
    }
}

jit::program with_header(const std::string& contents) {
  return jit::program("uses_header.cu", "#include \"params.h\"\nextern \"C\" __global__ void k(int* p) { *p = N; }\n")
      .add_header("params.h", contents);
}

}  // namespace

TEST_CASE("a header's contents decide the key, not its name", "[jit][cache][keys]") {
  CHECK(key(with_header("#define N 1\n")) == key(with_header("#define N 1\n")));
  CHECK(key(with_header("#define N 1\n")) != key(with_header("#define N 2\n")));
  CHECK(key(with_header("#define N 1\n")) != key(with_header("#define N 1 \n")));  // one byte more
  // The name too: the same contents under another include name is another program.
  jit::program renamed("uses_header.cu", "#include \"params.h\"\nextern \"C\" __global__ void k(int* p) { *p = N; }\n");
  renamed.add_header("other.h", "#define N 1\n");
  CHECK(key(renamed) != key(with_header("#define N 1\n")));
}

TEST_CASE("a changed header's contents compile anew through both caches, the old ones still hit",
          "[jit][cache][keys]") {
  test::scratch_dir dir;
  jit::compiler c({true, dir.cache(), std::uint64_t{1} << 30});
  const auto one = c.compile(with_header("#define N 1\n"), sm90);
  const auto two = c.compile(with_header("#define N 2\n"), sm90);
  CHECK(one.outcome == jit::cache_outcome::miss);
  CHECK(two.outcome == jit::cache_outcome::miss);  // not the memory hit a name-keyed cache would give
  CHECK(one.key != two.key);
  CHECK(one->image != two->image);
  CHECK(c.compile(with_header("#define N 1\n"), sm90).outcome == jit::cache_outcome::memory_hit);
  jit::compiler fresh({true, dir.cache(), std::uint64_t{1} << 30});
  const auto again = fresh.compile(with_header("#define N 2\n"), sm90);
  CHECK(again.outcome == jit::cache_outcome::disk_hit);
  CHECK(again->image == two->image);
}

TEST_CASE("a kernel package's edited header file gives another key", "[jit][cache][keys]") {
  test::scratch_dir dir;
  fs::create_directories(dir.path / "pkg");
  test::write_file(dir.path / "pkg" / "cuasync.manifest",
                   "package keys\nsource k.cu\nheader params.h\nkernel k\n");
  test::write_file(dir.path / "pkg" / "k.cu",
                   "#include \"params.h\"\nextern \"C\" __global__ void k(int* p) { *p = N; }\n");
  test::write_file(dir.path / "pkg" / "params.h", "#define N 1\n");
  const auto first = jit::kernel_package::load(dir.path / "pkg");
  test::write_file(dir.path / "pkg" / "params.h", "#define N 2\n");  // same name, same size
  const auto edited = jit::kernel_package::load(dir.path / "pkg");
  CHECK(key(first.program, first.options) != key(edited.program, edited.options));
  test::write_file(dir.path / "pkg" / "params.h", "#define N 1\n");
  const auto restored = jit::kernel_package::load(dir.path / "pkg");
  CHECK(key(first.program, first.options) == key(restored.program, restored.options));
}

TEST_CASE("each option gives its own key, and equal options the same", "[jit][cache][keys]") {
  const jit::program p = test::small_program(1);
  using change = std::function<void(jit::compile_options&)>;
  const std::vector<std::pair<std::string, change>> changes = {
      {"base", [](jit::compile_options&) {}},
      {"--std=c++20", [](jit::compile_options& o) { o.standard = "c++20"; }},
      {"-DA", [](jit::compile_options& o) { o.define("A"); }},
      {"-DA=1", [](jit::compile_options& o) { o.define("A", "1"); }},
      {"-DA=2", [](jit::compile_options& o) { o.define("A", "2"); }},
      {"-DB=1", [](jit::compile_options& o) { o.define("B", "1"); }},
      {"-DA=1 -DB=1", [](jit::compile_options& o) { o.define("A", "1").define("B", "1"); }},
      {"-DAB=1", [](jit::compile_options& o) { o.define("AB", "1"); }},  // not "-DA" + "B=1" run together
      {"-I/a", [](jit::compile_options& o) { o.include("/a"); }},
      {"-I/b", [](jit::compile_options& o) { o.include("/b"); }},
      {"--use_fast_math", [](jit::compile_options& o) { o.fast_math = true; }},
      {"--fmad=true", [](jit::compile_options& o) { o.fmad = true; }},
      {"--fmad=false", [](jit::compile_options& o) { o.fmad = false; }},
      {"--generate-line-info", [](jit::compile_options& o) { o.line_info = true; }},
      {"--device-debug", [](jit::compile_options& o) { o.debug = true; }},
      {"-rdc=true", [](jit::compile_options& o) { o.relocatable_device_code = true; }},
      {"--maxrregcount=32", [](jit::compile_options& o) { o.max_registers = 32; }},
      {"--maxrregcount=64", [](jit::compile_options& o) { o.max_registers = 64; }},
      {"-pch", [](jit::compile_options& o) { o.precompiled_headers = true; }},
      {"extra -lineinfo", [](jit::compile_options& o) { o.extra = {"-lineinfo"}; }},
      {"extra -Xptxas -v", [](jit::compile_options& o) { o.extra = {"-Xptxas", "-v"}; }},
      {"extra '-Xptxas -v'", [](jit::compile_options& o) { o.extra = {"-Xptxas -v"}; }},
  };
  std::vector<std::pair<std::string, jit::cache_key>> keys;
  for (const auto& [name, apply] : changes) {
    jit::compile_options o = plain();
    apply(o);
    keys.emplace_back(name, key(p, o));
    jit::compile_options same = plain();
    apply(same);
    INFO(name);
    CHECK(key(p, same) == keys.back().second);  // the same inputs, the same key
  }
  check_all_distinct(keys);
}

TEST_CASE("the toolkit's include directories are part of the key", "[jit][cache][keys]") {
  const jit::program p = test::small_program(1);
  jit::compile_options with = plain();
  with.toolkit_includes = true;
  // The directories belong to the NVRTC's library: another library may add others (here, possibly none at all).
  CHECK(key(p, with) != key(p, plain()));
  CHECK(key(p, with) == key(p, with));
}

TEST_CASE("another NVRTC, by version or by library, gives another key", "[jit][cache][keys]") {
  const jit::program p = test::small_program(1);
  const std::vector<std::pair<std::string, jit::cache_key>> keys = {
      {"13.0 toolkit", key(p, plain(), nvrtc_13)},
      {"12.9 toolkit", key(p, plain(), nvrtc(12, 9, "/usr/local/cuda-12.9/lib64/libnvrtc.so.12"))},
      {"13.1 same path", key(p, plain(), nvrtc(13, 1, nvrtc_13.library))},
      {"13.0 pip wheel",
       key(p, plain(), nvrtc(13, 0, "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13"))},
      {"13.0 known by version only", jit::make_cache_key(p, sm90, plain(), 13000)},
  };
  check_all_distinct(keys);
  // Equal identities, the same key, whichever object says it (the loaded NVRTC's, or the one its record restores).
  jit::nvrtc_info copy = nvrtc_13;
  copy.supported_archs = {90};  // the architectures choose the target, which is keyed itself
  CHECK(key(p, plain(), copy) == key(p, plain(), nvrtc_13));
  CHECK(jit::make_cache_key(p, sm90, plain(), 13000) == jit::make_cache_key(p, sm90, plain(), 13000));
}

TEST_CASE("the target and the format version give their own keys", "[jit][cache][keys]") {
  const jit::program p = test::small_program(1);
  check_all_distinct({{"sm_90", key(p)},
                      {"sm_80", key(p, plain(), nvrtc_13, {jit::output_kind::cubin, 80})},
                      {"compute_90", key(p, plain(), nvrtc_13, {jit::output_kind::ptx, 90})},
                      {"lto_90", key(p, plain(), nvrtc_13, {jit::output_kind::ltoir, 90})},
                      {"format + 1", jit::make_cache_key(p, sm90, plain(), nvrtc_13, jit::cache_format_version + 1)}});
}

TEST_CASE("each template name expression gives its own key, and the same expressions hit", "[jit][cache][keys]") {
  const char* source = "template <class T, int N> __global__ void k(T* p) { p[threadIdx.x] = T(N); }\n";
  auto with = [&](std::vector<std::string> expressions) {
    jit::program p("templated.cu", source);
    for (auto& e : expressions) p.add_name_expression(std::move(e));
    return p;
  };
  check_all_distinct({{"none", key(with({}))},
                      {"k<float, 1>", key(with({"k<float, 1>"}))},
                      {"k<float, 2>", key(with({"k<float, 2>"}))},
                      {"k<double, 1>", key(with({"k<double, 1>"}))},
                      {"k<int, 1>", key(with({"k<int, 1>"}))},
                      {"k<float, 1>, k<double, 1>", key(with({"k<float, 1>", "k<double, 1>"}))},
                      {"k<double, 1>, k<float, 1>", key(with({"k<double, 1>", "k<float, 1>"}))}});
  CHECK(key(with({"k<float, 1>"})) == key(with({"k<float, 1>"})));

  // End to end: each instantiation compiled once, then found by its expression in memory and on disk.
  test::scratch_dir dir;
  const std::vector<std::string> expressions = {"k<float, 1>", "k<double, 1>", "k<int, 7>"};
  std::vector<jit::compile_result> first;
  {
    jit::compiler c({true, dir.cache(), std::uint64_t{1} << 30});
    for (const auto& e : expressions) first.push_back(c.compile(with({e}), sm90));
    for (const auto& e : expressions) CHECK(c.compile(with({e}), sm90).outcome == jit::cache_outcome::memory_hit);
    CHECK(c.stats().compiles == expressions.size());
  }
  jit::compiler fresh({true, dir.cache(), std::uint64_t{1} << 30});
  for (std::size_t i = 0; i < expressions.size(); ++i) {
    const auto hit = fresh.compile(with({expressions[i]}), sm90);
    INFO(expressions[i]);
    CHECK(first[i].outcome == jit::cache_outcome::miss);
    CHECK(hit.outcome == jit::cache_outcome::disk_hit);
    CHECK(hit->lowered_name(expressions[i]) == first[i]->lowered_name(expressions[i]));
    CHECK(hit->lowered_name(expressions[i]).starts_with("_Z1k"));
  }
  CHECK(fresh.stats().compiles == 0);
}
