// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Kernel packages: a directory with a manifest, compiled through the caches; a malformed manifest is an error naming
// the file, the line and the problem; no entry reads a file outside the package, symbolic links resolved.
#include <cuasync/jit/kernel_package.hpp>

#include <catch2/catch.hpp>

#include "call_site.hpp"
#include "scratch.hpp"

#include <cuasync/jit/compiler.hpp>

#include <algorithm>

using namespace cuasync;

namespace {
const char* source = R"(#include "common.cuh"
extern "C" __global__ void fill(float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = VALUE * SCALE;
}
template <class T> __global__ void scale(T* data, int n, T by) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= by;
}
)";

// A package directory holding `manifest` and the files it may name.
struct package_dir {
  test::scratch_dir dir;
  explicit package_dir(const std::string& manifest) {
    std::filesystem::create_directories(dir.path / "include");
    test::write_file(dir.path / "kernels.cu", source);
    test::write_file(dir.path / "include" / "common.cuh", "#define SCALE 2.0f\n");
    test::write_file(dir.path / jit::kernel_package::manifest_name, manifest);
  }
};

std::string error_of_load(const std::string& manifest) {
  package_dir p(manifest);
  try {
    jit::kernel_package::load(p.dir.path);
  } catch (const cuda_error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("a kernel package loads from its manifest and compiles through the cache", "[jit][package]") {
  package_dir p(R"(# a test package
package demo
source kernels.cu
header include/common.cuh as common.cuh   # found by #include "common.cuh"
define VALUE=3.0f
option --use_fast_math
std c++17
kernel fill
template scale<float>
template scale<double>
)");
  const jit::kernel_package k = jit::kernel_package::load(p.dir.path);
  CHECK(k.name == "demo");
  CHECK(k.kernels == std::vector<std::string>{"fill"});
  CHECK(k.templates == std::vector<std::string>{"scale<float>", "scale<double>"});
  CHECK(k.entry_points().size() == 3);
  CHECK(k.program.name() == "kernels.cu");
  CHECK(k.program.headers().count("common.cuh") == 1);
  CHECK(k.options.extra == std::vector<std::string>{"--use_fast_math"});
  REQUIRE(k.options.defines.size() == 1);
  CHECK(k.options.defines[0] == std::pair<std::string, std::string>{"VALUE", "3.0f"});
  const jit::compile_result c = jit::default_compiler().compile(k.program, 90, k.options);
  auto lowered = [&](const std::string& e) {
    return std::count_if(c->lowered_names.begin(), c->lowered_names.end(), [&](const auto& kv) { return kv.first == e; });
  };
  CHECK(lowered("scale<float>") == 1);
  CHECK(lowered("scale<double>") == 1);
}

TEST_CASE("a manifest written on Windows (CRLF line ends) loads", "[jit][package]") {
  package_dir p("package demo\r\nsource kernels.cu\r\ndefine VALUE=3.0f\r\nkernel fill\r\n");
  const jit::kernel_package k = jit::kernel_package::load(p.dir.path);
  CHECK(k.name == "demo");
  CHECK(k.program.name() == "kernels.cu");
  CHECK(k.kernels == std::vector<std::string>{"fill"});
}

TEST_CASE("a symbolic link inside a package cannot lead out of it", "[jit][package][security]") {
  using Catch::Contains;
  test::scratch_dir outside;
  std::filesystem::create_directories(outside.path / "include");
  test::write_file(outside.path / "secret.cu", "extern \"C\" __global__ void fill() {}\n");
  test::write_file(outside.path / "include" / "secret.h", "#define SECRET 1\n");
  package_dir p("package p\nsource kernels.cu\nkernel fill\n");
  std::filesystem::create_symlink(outside.path / "secret.cu", p.dir.path / "linked.cu");
  std::filesystem::create_directory_symlink(outside.path / "include", p.dir.path / "linked_include");
  std::filesystem::create_symlink("kernels.cu", p.dir.path / "alias.cu");  // stays inside: fine
  auto error_of_manifest = [&](const std::string& manifest) {
    test::write_file(p.dir.path / jit::kernel_package::manifest_name, manifest);
    try {
      jit::kernel_package::load(p.dir.path);
    } catch (const cuda_error& e) {
      CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of_manifest("package p\nsource linked.cu\nkernel fill\n"),
             Contains("cuasync.manifest:2: 'linked.cu' leaves the package's directory") &&
                 Contains((std::filesystem::canonical(outside.path) / "secret.cu").string()));
  CHECK_THAT(error_of_manifest("package p\nsource kernels.cu\nheader linked_include/secret.h as s.h\nkernel fill\n"),
             Contains("cuasync.manifest:3: 'linked_include/secret.h' leaves the package's directory"));
  // A path that steps out and back in stays inside once resolved; a link to a file of the package is followed.
  const std::string back_in = "../" + p.dir.path.filename().string() + "/kernels.cu";
  CHECK(jit::kernel_package::parse("package p\nsource " + back_in + "\nkernel fill\n", p.dir.path).name == "p");
  CHECK(error_of_manifest("package p\nsource alias.cu\nkernel fill\n") == "no error");
  // The package's own directory may be reached through a link.
  const std::filesystem::path via_link = outside.path / "package_link";
  std::filesystem::create_directory_symlink(p.dir.path, via_link);
  CHECK(jit::kernel_package::load(via_link).program.source() == source);
}

TEST_CASE("a malformed kernel package manifest names the file, the line and the problem", "[jit][package]") {
  using Catch::Contains;
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\nkernal fill\n"),
             Contains("cuasync.manifest:3: unknown entry 'kernal'"));
  CHECK_THAT(error_of_load("source kernels.cu\n"), Contains("cuasync.manifest:1: the manifest must begin with"));
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\nsource kernels.cu\nkernel fill\n"),
             Contains("cuasync.manifest:3: a second 'source' entry"));
  CHECK_THAT(error_of_load("package p\nsource ../outside.cu\n"),
             Contains("cuasync.manifest:2: '../outside.cu' leaves the package's directory"));
  CHECK_THAT(error_of_load("package p\nsource /etc/passwd\n"), Contains("must be a path relative to the package"));
  CHECK_THAT(error_of_load("package p\n\n# nothing\nsource missing.cu\n"), Contains("cuasync.manifest:4: cannot read"));
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\n"), Contains("no 'kernel' or 'template' entry"));
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\nstd c++99\nkernel fill\n"),
             Contains("cuasync.manifest:3: 'std' takes"));
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\nheader include/common.cuh as\nkernel fill\n"),
             Contains("cuasync.manifest:3: 'header' takes a file"));
  CHECK_THAT(error_of_load(""), Contains("no 'package NAME' entry"));
  // An option that would override the target chosen for the device.
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\noption -arch=sm_80\nkernel fill\n"),
             Contains("cuasync.manifest:3: option '-arch=sm_80' changes what NVRTC produces"));
  CHECK_THAT(error_of_load("package p\nsource kernels.cu\noption --gpu-architecture sm_80\nkernel fill\n"),
             Contains("cuasync.manifest:3: option '--gpu-architecture sm_80' changes"));
  // A directory named as the source opens as an empty stream: refused, not compiled as an empty program.
  CHECK_THAT(error_of_load("package p\nsource include\nkernel fill\n"), Contains("cuasync.manifest:2: cannot read"));
  test::scratch_dir empty;
  std::filesystem::create_directories(empty.path);
  test::check_call_site(test::error_of([&] { jit::kernel_package::load(empty.path); }));
}
