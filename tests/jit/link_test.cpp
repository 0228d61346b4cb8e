// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// nvJitLink on CI (no GPU): loading it (missing, not nvJitLink, found in the search path), a templated kernel and
// the user fragments it calls compiled to LTO-IR and linked into one CUBIN, link errors with nvJitLink's log, the
// options' checks, and the link cache (memory, disk, keys). Where nvJitLink is truly absent the cases that need it
// skip, and the executable says how many and why when it ends.
#include <cuasync/jit/link.hpp>

#include <catch2/catch.hpp>

#include "child_process.hpp"
#include "nvjitlink_skip.hpp"
#include "scratch.hpp"

#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/nvrtc.hpp>

#include <cstdio>
#include <cstring>

using namespace cuasync;
using jit::output_kind;

namespace {

using test::nvjitlink_or_skip;

// The cuDF pattern: a templated kernel that calls a device function it only declares.
jit::program kernel_part() {
  return jit::program("apply.cu", R"(
extern __device__ float user_op(float x);
template <typename T>
__global__ void apply(T* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = user_op(data[i]);
}
)")
      .add_name_expression("apply<float>");
}

jit::program fragment(const std::string& body, const std::string& name = "op.cu") {
  return jit::program(name, "__device__ float user_op(float x) { return " + body + "; }\n");
}

bool contains(const std::vector<std::byte>& image, const std::string& s) {
  const auto* b = reinterpret_cast<const char*>(image.data());
  return std::string_view(b, image.size()).find(s) != std::string_view::npos;
}

std::shared_ptr<const jit::compiled_program> ltoir(const jit::program& p) {
  jit::compile_options o;
  o.relocatable_device_code = true;
  return std::make_shared<const jit::compiled_program>(jit::compile(p, {output_kind::ltoir, 90}, o));
}

}  // namespace

TEST_CASE("nvjitlink probe", "[.nvjitlink_probe]") {
  CUASYNC_CHILD_ONLY();
  try {
    const auto& info = jit::nvjitlink_library();
    std::printf("PROBE loaded nvJitLink %s from %s\n", info.version_string().c_str(), info.library.c_str());
  } catch (const jit::nvjitlink_not_found_error& e) {
    std::printf("PROBE nvjitlink_not_found_error: %s\n", e.what());
  }
}

TEST_CASE("nvJitLink reports its version and where it was loaded from", "[jit][link]") {
  if (!nvjitlink_or_skip()) return;
  const auto& info = jit::nvjitlink_library();
  CHECK(jit::nvjitlink_loaded());
  CHECK(info.major >= 12);
  CHECK_THAT(info.library, Catch::Contains("libnvJitLink.so"));
  CHECK(info.version() == static_cast<int>(info.major * 1000 + info.minor * 10));
}

TEST_CASE("a missing nvJitLink is an nvjitlink_not_found_error naming the file and CUASYNC_LIBNVJITLINK",
          "[jit][link]") {
  auto r = test::run_child({"nvjitlink probe", "--success"}, {"CUASYNC_LIBNVJITLINK=/nonexistent/libnvJitLink.so.13"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE nvjitlink_not_found_error"));
  CHECK_THAT(r.output, Catch::Contains("/nonexistent/libnvJitLink.so.13"));
  CHECK_THAT(r.output, Catch::Contains("CUASYNC_LIBNVJITLINK"));
}

TEST_CASE("a library that is not nvJitLink is refused, naming the missing entry point", "[jit][link]") {
  auto r = test::run_child({"nvjitlink probe", "--success"}, {"CUASYNC_LIBNVJITLINK=libm.so.6"});
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("PROBE nvjitlink_not_found_error"));
  CHECK_THAT(r.output, Catch::Contains("has no entry point nvJitLinkCreate"));
}

TEST_CASE("a templated kernel and a user fragment compiled to LTO-IR link into one CUBIN", "[jit][link]") {
  if (!nvjitlink_or_skip()) return;
  const std::vector<jit::link_part> parts{ltoir(kernel_part()), ltoir(fragment("x * 2.0f + 1.0f"))};
  const jit::compiled_program linked = jit::link(parts, 90);
  REQUIRE(linked.image.size() > 4);
  CHECK(std::memcmp(linked.image.data(), "\x7f" "ELF", 4) == 0);
  CHECK(linked.target == jit::target{output_kind::cubin, 90});
  CHECK(linked.name == "apply.cu+op.cu");
  CHECK(linked.nvrtc_version == jit::nvjitlink_library().version());
  // The kernel's lowered name travels with the result and is a symbol of the CUBIN.
  REQUIRE(linked.lowered_names.size() == 1);
  CHECK(linked.lowered_names[0].first == "apply<float>");
  CHECK(linked.lowered_name("apply<float>") == "_Z5applyIfEvPT_i");
  CHECK(contains(linked.image, "_Z5applyIfEvPT_i"));

  SECTION("another fragment gives another CUBIN") {
    const std::vector<jit::link_part> other{parts[0], ltoir(fragment("x - 3.0f"))};
    CHECK(jit::link(other, 90).image != linked.image);
  }
  SECTION("an LTO-IR part for an older architecture links for a newer one") {
    jit::compile_options o;
    o.relocatable_device_code = true;
    const std::vector<jit::link_part> mixed{
        std::make_shared<const jit::compiled_program>(jit::compile(kernel_part(), {output_kind::ltoir, 80}, o)),
        parts[1]};
    CHECK(jit::link(mixed, 90).target.arch == 90);
  }
}

TEST_CASE("a link with an undefined function is a link_error with nvJitLink's log", "[jit][link][errors]") {
  if (!nvjitlink_or_skip()) return;
  const std::vector<jit::link_part> parts{ltoir(kernel_part())};
  try {
    (void)jit::link(parts, 90, {}, "alone");
    FAIL("a link with an undefined user_op succeeded");
  } catch (const jit::link_error& e) {
    CHECK(e.code().category() == nvjitlink_category());
    CHECK(e.link_name() == "alone");
    CHECK_THAT(e.log(), Catch::Contains("user_op"));
    CHECK_THAT(std::string(e.what()), Catch::Contains("link 'alone'") && Catch::Contains("user_op") &&
                                          Catch::Contains("-arch=sm_90") && Catch::Contains("-lto"));
  }
}

TEST_CASE("bad links are refused before nvJitLink with what is wrong", "[jit][link][errors]") {
  const auto fake = jit::link_part::from_image("fake.ltoir", {output_kind::ltoir, 100}, std::vector<std::byte>(8));
  CHECK_THROWS_WITH(jit::link(std::vector<jit::link_part>{}, 90), Catch::Contains("has no parts"));
  CHECK_THROWS_WITH(jit::link(std::vector<jit::link_part>{fake}, 90),
                    Catch::Contains("'fake.ltoir'") && Catch::Contains("LTO-IR compute_100") &&
                        Catch::Contains("compile it for compute_90 or older"));
  const auto cubin = jit::link_part::from_image("k.cubin", {output_kind::cubin, 80}, std::vector<std::byte>(8));
  CHECK_THROWS_WITH(jit::link(std::vector<jit::link_part>{cubin}, 90),
                    Catch::Contains("a CUBIN links only for its own architecture"));
  const std::vector<jit::link_part> empty{jit::link_part(std::shared_ptr<const jit::compiled_program>())};
  CHECK_THROWS_WITH(jit::link(empty, 90), Catch::Contains("part 0 of link") && Catch::Contains("is empty"));

  jit::link_options o;
  o.extra = {"-arch=sm_80"};
  CHECK_THROWS_WITH(o.check(), Catch::Contains("'-arch=sm_80'"));
  o.extra = {"-lto"};
  CHECK_THROWS_WITH(o.check(), Catch::Contains("-lto is added"));
  o.extra.clear();
  o.optimization_level = 4;
  CHECK_THROWS_WITH(o.check(), Catch::Contains("outside 0..3"));
  o.optimization_level = 2;
  o.max_registers = 0;
  CHECK_THROWS_WITH(o.check(), Catch::Contains("not positive"));
  o.max_registers = 64;
  o.line_info = true;
  CHECK(o.arguments(90, true) ==
        std::vector<std::string>{"-arch=sm_90", "-lto", "-O2", "-lineinfo", "-maxrregcount=64"});
  CHECK(o.arguments(75, false).front() == "-arch=sm_75");
}

TEST_CASE("the link cache: memory hit, disk hit in a fresh compiler, one key per input and option",
          "[jit][link][cache]") {
  if (!nvjitlink_or_skip()) return;
  test::scratch_dir scratch;
  const jit::disk_cache_settings disk{true, scratch.cache(), std::uint64_t{1} << 30};
  const std::vector<jit::program> programs{kernel_part(), fragment("x * 2.0f + 1.0f")};
  jit::compiler c(disk);
  const auto first = c.link_programs(programs, 90);
  CHECK(first.outcome == jit::cache_outcome::miss);
  CHECK(c.stats().links == 1);
  CHECK(first->target == jit::target{output_kind::cubin, 90});

  const auto again = c.link_programs(programs, 90);
  CHECK(again.outcome == jit::cache_outcome::memory_hit);
  CHECK(again.program == first.program);
  CHECK(c.stats().links == 1);

  jit::compiler fresh(disk);
  const auto from_disk = fresh.link_programs(programs, 90);
  CHECK(from_disk.outcome == jit::cache_outcome::disk_hit);
  CHECK(from_disk->image == first->image);
  CHECK(from_disk->lowered_names == first->lowered_names);
  CHECK(fresh.stats().links == 0);

  // The key changes with each input and option, and only then.
  std::vector<jit::link_part> parts;
  for (const auto& p : programs) {
    jit::compile_options rdc;
    rdc.relocatable_device_code = true;
    parts.emplace_back(c.compile(p, 90, rdc, jit::output_request::ltoir));
  }
  const auto& nvjitlink = jit::nvjitlink_library();
  const std::string name = jit::default_link_name(parts);
  const jit::cache_key key = jit::make_link_key(parts, 90, {}, name, nvjitlink);
  CHECK(key == first.key);
  CHECK(jit::make_link_key(parts, 90, {}, name, nvjitlink) == key);
  CHECK(jit::make_link_key(parts, 89, {}, name, nvjitlink) != key);
  CHECK(jit::make_link_key(parts, 90, {}, "other", nvjitlink) != key);
  jit::link_options o;
  o.optimization_level = 1;
  CHECK(jit::make_link_key(parts, 90, o, name, nvjitlink) != key);
  o = {};
  o.extra = {"-ftz=true"};
  CHECK(jit::make_link_key(parts, 90, o, name, nvjitlink) != key);
  std::vector<jit::link_part> swapped{parts[1], parts[0]};
  CHECK(jit::make_link_key(swapped, 90, {}, name, nvjitlink) != key);
  jit::nvjitlink_info older = nvjitlink;
  older.minor += 1;
  CHECK(jit::make_link_key(parts, 90, {}, name, older) != key);
  const auto changed = c.link_programs(std::vector<jit::program>{kernel_part(), fragment("x * 3.0f")}, 90);
  CHECK(changed.outcome == jit::cache_outcome::miss);
  CHECK(changed.key != key);
  CHECK(c.stats().links == 2);
  // A link's key never equals the compile key of one of its parts.
  for (const auto& p : parts) CHECK(jit::make_link_key({&p, 1}, 90, {}, p.program->name, nvjitlink) != key);
}

TEST_CASE("a failed link is not cached and fails again", "[jit][link][cache]") {
  if (!nvjitlink_or_skip()) return;
  jit::compiler c(jit::disk_cache_settings{false, {}, 0});
  const std::vector<jit::program> alone{kernel_part()};
  CHECK_THROWS_AS(c.link_programs(alone, 90), jit::link_error);
  CHECK_THROWS_AS(c.link_programs(alone, 90), jit::link_error);
  CHECK(c.stats().links == 0);
}
