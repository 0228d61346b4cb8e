// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compiling with NVRTC on CI (no GPU): CUBIN, PTX and LTO-IR; name expressions; headers, defines, toolkit includes;
// options; compile errors that quote the offending line.
#include <cuasync/jit/program.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "kernels.hpp"

#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/nvrtc.hpp>

#include <algorithm>
#include <cstring>

using namespace cuasync;
using jit::output_kind;

namespace {
bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST_CASE("a program compiles to CUBIN, PTX and LTO-IR", "[jit][compile]") {
  const jit::program p = test::templates_program();
  SECTION("CUBIN for sm_90 is an ELF image") {
    const auto c = jit::compile(p, {output_kind::cubin, 90});
    REQUIRE(c.image.size() > 4);
    CHECK(std::memcmp(c.image.data(), "\x7f" "ELF", 4) == 0);
    CHECK(c.target == jit::target{output_kind::cubin, 90});
    CHECK(c.nvrtc_version == jit::nvrtc_library().version());
    CHECK(c.name == "templates.cu");
  }
  SECTION("PTX for compute_90 is text with the ISA version, the target and the kernels") {
    const auto c = jit::compile(p, {output_kind::ptx, 90});
    const std::string_view ptx = c.text();
    CHECK(jit::parse_ptx_isa(ptx).has_value());
    CHECK(ptx.find(".target sm_90") != std::string_view::npos);
    CHECK(ptx.find(".entry fill") != std::string_view::npos);
    CHECK(ptx.find(c.lowered_name("saxpy<float, 256>")) != std::string_view::npos);
    CHECK(ptx.back() != '\0');
  }
  SECTION("LTO-IR is neither ELF nor PTX") {
    const auto c = jit::compile(p, {output_kind::ltoir, 90});
    REQUIRE(c.image.size() > 16);
    CHECK(std::memcmp(c.image.data(), "\x7f" "ELF", 4) != 0);
    CHECK(!jit::parse_ptx_isa(c.text()));
    CHECK(c.target.kind == output_kind::ltoir);
  }
}

TEST_CASE("name expressions of two templates give their lowered names", "[jit][compile][names]") {
  const auto c = jit::compile(test::templates_program(), {output_kind::ptx, 90});
  REQUIRE(c.lowered_names.size() == 2);
  CHECK(c.lowered_names[0].first == "saxpy<float, 256>");
  CHECK(c.lowered_names[1].first == "ns::reduce<double>");
  // Itanium mangling: saxpy<float, 256>(float, const float*, float*, int), ns::reduce<double>(...)
  CHECK(c.lowered_name("saxpy<float, 256>") == "_Z5saxpyIfLi256EEvT_PKS0_PS0_i");
  CHECK_THAT(c.lowered_name("ns::reduce<double>"), Catch::StartsWith("_ZN2ns6reduceIdEEv"));
  CHECK(c.text().find(".entry " + c.lowered_name("ns::reduce<double>")) != std::string_view::npos);
  CHECK_THROWS_WITH(c.lowered_name("saxpy<double, 128>"),
                    Catch::Contains("not a name expression") && Catch::Contains("'saxpy<float, 256>'"));
}

TEST_CASE("in-memory headers, defines and the toolkit's headers are found", "[jit][compile][headers]") {
  jit::program p("headers.cu", R"(#include "config.h"
#include <cuda/std/cstdint>
#include <cuda_fp16.h>
extern "C" __global__ void k(cuda::std::uint32_t* out, __half h) {
  out[0] = CONFIG_VALUE + SCALE + static_cast<int>(__half2float(h));
}
)");
  p.add_header("config.h", "#pragma once\n#define CONFIG_VALUE 40\n");
  jit::compile_options o;
  o.define("SCALE", "2");
  const auto c = jit::compile(p, {output_kind::ptx, 90}, o);
  CHECK(c.text().find(".entry k") != std::string_view::npos);
  CHECK(c.text().find("42") != std::string_view::npos);  // 40 + 2 folded

  o.toolkit_includes = false;
  CHECK_THROWS_AS(jit::compile(p, {output_kind::ptx, 90}, o), jit::compile_error);
}

TEST_CASE("options turn into NVRTC's arguments", "[jit][compile][options]") {
  jit::compile_options o;
  o.standard = "c++20";
  o.define("A", "1").define("B").include("/opt/inc");
  o.fast_math = true;
  o.fmad = false;
  o.line_info = true;
  o.debug = true;
  o.relocatable_device_code = true;
  o.max_registers = 64;
  o.precompiled_headers = true;
  o.extra = {"--extra-device-vectorization"};
  o.toolkit_includes = false;
  const auto a = o.arguments({output_kind::cubin, 90}, "/cache/pch");
  CHECK(a.front() == "--gpu-architecture=sm_90");
  for (const char* s : {"--std=c++20", "-DA=1", "-DB", "-I/opt/inc", "--use_fast_math", "--fmad=false",
                        "--generate-line-info", "--device-debug", "--relocatable-device-code=true",
                        "--maxrregcount=64", "--pch", "--pch-dir=/cache/pch"})
    CHECK(contains(a, s));
  CHECK(a.back() == "--extra-device-vectorization");
  CHECK(contains(jit::compile_options{}.arguments({output_kind::ltoir, 90}), "-dlto"));
  CHECK(contains(jit::compile_options{}.arguments({output_kind::ptx, 120}), "--gpu-architecture=compute_120"));
  CHECK(contains(jit::compile_options{}.arguments({output_kind::ptx, 90}), "-I" + jit::toolkit_include_dirs()[0]));
  o.max_registers = 0;
  CHECK_THROWS_WITH(o.arguments({output_kind::cubin, 90}), Catch::Contains("max_registers must be positive"));
}

TEST_CASE("extra options that change the target are refused, naming the option and what to use", "[jit][compile]"
          "[options]") {
  using Catch::Contains;
  const jit::target sm_90{output_kind::cubin, 90};
  auto error_with = [&](std::vector<std::string> extra) {
    jit::compile_options o;
    o.extra = std::move(extra);
    try {
      o.arguments(sm_90);
    } catch (const cuda_error& e) {
      CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const char* arch : {"-arch=sm_80", "--gpu-architecture=compute_80", "--gpu-architecture sm_80", "--arch=sm_80"})
    CHECK_THAT(error_with({arch}), Contains(std::string("extra option '") + arch + "' changes what NVRTC produces") &&
                                       Contains("target"));
  // The two-argument spellings: the option alone is refused, whatever follows it.
  CHECK_THAT(error_with({"-arch", "sm_80"}), Contains("'-arch' changes what NVRTC produces"));
  CHECK_THAT(error_with({"--gpu-architecture", "sm_80"}), Contains("'--gpu-architecture' changes"));
  CHECK_THAT(error_with({"-code=sm_80"}), Contains("'-code=sm_80' changes"));
  CHECK_THAT(error_with({"--gpu-code=sm_80"}), Contains("'--gpu-code=sm_80' changes"));
  for (const char* rdc : {"-rdc=true", "--relocatable-device-code=false", "-dc", "--device-c", "-dw", "--device-w"})
    CHECK_THAT(error_with({rdc}), Contains(std::string("'") + rdc + "' changes") &&
                                      Contains("compile_options::relocatable_device_code"));
  CHECK_THAT(error_with({"-dlto"}), Contains("output_request::ltoir"));
  CHECK_THAT(error_with({"--dlink-time-opt"}), Contains("output_request::ltoir"));
  CHECK_THAT(error_with({"-G", "--optix-ir"}), Contains("'--optix-ir' changes"));

  // Options that leave the target alone pass through unchanged.
  const std::vector<std::string> harmless{"-G", "-lineinfo", "--use_fast_math", "-DARCH=80", "-Darch", "-I/opt/inc",
                                          "-std=c++20", "--extra-device-vectorization", "-default-device"};
  jit::compile_options o;
  o.extra = harmless;
  const auto a = o.arguments(sm_90);
  CHECK(std::equal(harmless.begin(), harmless.end(), a.end() - static_cast<std::ptrdiff_t>(harmless.size())));
  CHECK(jit::refused_extra_option("--use_fast_math").empty());
}

TEST_CASE("the compiler refuses target-changing extra options before its caches", "[jit][compile][options]") {
  jit::compile_options o;
  o.extra = {"-arch=sm_80"};
  jit::compiler compiler(jit::disk_cache_settings{false, {}, 0});
  const jit::program p = test::small_program(7);
  CHECK_THROWS_WITH(compiler.compile(p, 90, o), Catch::Contains("'-arch=sm_80' changes what NVRTC produces"));
  o.extra = {"-arch", "compute_80"};
  CHECK_THROWS_WITH(compiler.compile(p, {output_kind::ptx, 90}, o), Catch::Contains("'-arch' changes"));
  CHECK(compiler.stats().compiles == 0);
}

TEST_CASE("a compile error quotes the first error with the offending source line", "[jit][compile][error]") {
  jit::program p("broken.cu", R"(extern "C" __global__ void k(float* y, const float* x) {
  const int i = threadIdx.x;
  float a = 2.0f;
  y[i] = a * x[i] + undefined_thing;
}
)");
  try {
    jit::compile(p, {output_kind::cubin, 90});
    FAIL("no throw");
  } catch (const jit::compile_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(e.program_name() == "broken.cu");
    CHECK(e.code() == make_error_code(NVRTC_ERROR_COMPILATION));
    CHECK_THAT(what, Catch::Contains("program 'broken.cu' failed to compile"));
    CHECK_THAT(what, Catch::Contains("broken.cu(4): error"));
    CHECK_THAT(what, Catch::Contains("undefined_thing"));
    CHECK_THAT(what, Catch::Contains("    4 |   y[i] = a * x[i] + undefined_thing;"));
    CHECK_THAT(what, Catch::Contains("--gpu-architecture=sm_90"));
    CHECK_THAT(e.log(), Catch::Contains("identifier \"undefined_thing\" is undefined"));
    CHECK(contains(e.options(), "--gpu-architecture=sm_90"));
  }
}

TEST_CASE("an error in an in-memory header quotes the header's line", "[jit][compile][error]") {
  const jit::program p = jit::program("uses_header.cu", "#include \"bad.h\"\nextern \"C\" __global__ void k() {}\n")
                             .add_header("bad.h", "#pragma once\nint f() { return not_declared; }\n");
  CHECK_THROWS_WITH(jit::compile(p, {output_kind::ptx, 90}),
                    Catch::Contains("bad.h(2): error") && Catch::Contains("    2 | int f() { return not_declared; }"));
}

TEST_CASE("an invalid option or name expression is a compile_error with NVRTC's message", "[jit][compile][error]") {
  jit::compile_options o;
  o.extra = {"--no-such-option"};
  CHECK_THROWS_AS(jit::compile(test::small_program(1), {output_kind::ptx, 90}, o), jit::compile_error);
  CHECK_THROWS_WITH(jit::compile(test::small_program(1), {output_kind::ptx, 90}, o),
                    Catch::Contains("--no-such-option"));
  CHECK_THROWS_WITH(jit::program("p.cu", "").add_name_expression(""), Catch::Contains("empty name expression"));
}

TEST_CASE("the first error is found in an NVRTC log", "[jit][compile][error]") {
  const jit::program p("x.cu", "line one\nline two\nline three\n");
  CHECK(jit::detail::first_error("x.cu(2): warning: w\nx.cu(3): error: bad\n1 error detected\n", p) ==
        "x.cu(3): error: bad\n    3 | line three");
  CHECK(jit::detail::first_error("x.cu(9): error: past the end\n", p) == "x.cu(9): error: past the end");
  CHECK(jit::detail::first_error("nvrtc: error: invalid value for --gpu-architecture (-arch)\n", p) ==
        "nvrtc: error: invalid value for --gpu-architecture (-arch)");
  CHECK(jit::detail::first_error("", p).empty());
}

TEST_CASE("jit errors name the caller's line rather than cuasync's", "[jit][compile][error]") {
  using test::check_call_site;
  using test::error_of;
  const jit::program broken("broken.cu", "extern \"C\" __global__ void k() { undefined_thing(); }\n");
  jit::compile_options o;
  o.toolkit_includes = false;
  o.max_registers = 0;
  jit::compiler compiler(jit::disk_cache_settings{false, {}, 0});
  const int archs[] = {75, 90};
  check_call_site(error_of([&] { jit::program("p.cu", "").add_name_expression(""); }));
  check_call_site(error_of([&] { o.arguments({output_kind::cubin, 90}); }));
  check_call_site(error_of([&] { jit::compiled_program{}.lowered_name("k<int>"); }));
  check_call_site(error_of([&] { jit::select_target(5, archs); }));
  check_call_site(error_of([&] { jit::select_target(60, archs); }));
  check_call_site(error_of([&] { jit::check_ptx_loadable(".version 9.0\n.target sm_90\n", 12040, "new.ptx"); }));
  check_call_site(error_of([&] { jit::check_ptx_loadable("not PTX", 13000); }));
  // NVRTC's errors too, also when they come through the compiler's caches.
  check_call_site(error_of([&] { jit::compile(broken, {output_kind::cubin, 90}); }));
  check_call_site(error_of([&] { compiler.compile(broken, {output_kind::ptx, 90}); }));
  check_call_site(error_of([&] { compiler.compile(broken, 90); }));
}
