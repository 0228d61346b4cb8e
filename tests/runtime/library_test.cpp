// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Context-independent libraries: one compile and one cuLibraryLoadData serve every context (a second context on
// the device, or a second device where there is one), cuKernelGetFunction once per context, launches correct in
// each; a kernel refused on another context's stream; unknown kernels named. And a templated kernel linked with a
// user fragment by nvJitLink, launched on the GPU. CTest also runs the [library] cases on the simulated driver
// with two devices (tests/CMakeLists.txt).
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/library.hpp>
#include <cuasync/jit.hpp>
#include <cuasync/runtime/kernel_cache.hpp>

#include <catch2/catch.hpp>

#include "fill_kernel.hpp"
#include "gpu.hpp"
#include "simulated_driver.hpp"

#include <vector>

using namespace cuasync;
using namespace cuasync::runtime;

namespace {
using test::fill_and_read;
// A kernel the simulated driver runs by name (tests/fake_driver/sim_kernels.cpp) and any GPU compiles.
const char* fill_source = R"(
extern "C" __global__ void sim_fill_u32(unsigned* p, unsigned n, unsigned value) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}
)";

// The simulated driver loads PTX only; a GPU gets its CUBIN.
jit::output_request request() {
  return test::simulated_driver_loaded() ? jit::output_request::ptx : jit::output_request::automatic;
}

// A second context: device 1's primary one where there are two devices, else a context created on device 0.
struct second_context {
  CUcontext created = nullptr;
  std::optional<primary_context> primary;
  context_ref ctx;
  second_context() {
    if (device::count() > 1) {
      primary.emplace(primary_context::retain(device::get(1)));
      ctx = *primary;
      return;
    }
    const auto& d = detail::driver();
    CUdevice dev = 0;
    detail::check(d.cuDeviceGet(&dev, 0), "cuDeviceGet", std::source_location::current());
    detail::check(d.cuCtxCreate(&created, 0, dev), "cuCtxCreate", std::source_location::current());
    CUcontext popped = nullptr;
    d.cuCtxPopCurrent(&popped);
    ctx = context_ref::adopt(created);
  }
  ~second_context() {
    if (created) detail::driver().cuCtxDestroy(created);
  }
  second_context(const second_context&) = delete;
  second_context& operator=(const second_context&) = delete;
};
}  // namespace

TEST_CASE("one library serves two contexts: one compile, one load, a function per context", "[runtime][gpu][library]") {
  jit::compiler compiler(jit::disk_cache_settings{false, {}, 0});
  const jit::program program("fill_library.cu", fill_source);
  const primary_context first = primary_context::retain(device::get(0));
  second_context second;
  {
    kernel_cache cache(compiler);
    const kernel_ref a = cache.shared_kernel(first, program, "sim_fill_u32", {}, request());
    const kernel_ref b = cache.shared_kernel(second.ctx, program, "sim_fill_u32", {}, request());
    CHECK(compiler.stats().compiles == 1);
    CHECK(cache.stats().library_loads == 1);
    CHECK(cache.stats().library_hits == 1);
    CHECK(cache.stats().module_loads == 0);
    CHECK(a.context() == context_ref(first));
    CHECK(b.context() == second.ctx);
    CHECK(a.get() != b.get());  // one function per context
    CHECK(a.params().size() == 3);
    CHECK(b.params().size() == 3);

    CHECK(fill_and_read(first, a, 5u) == std::vector<unsigned>(64, 5u));
    CHECK(fill_and_read(second.ctx, b, 9u) == std::vector<unsigned>(64, 9u));

    // Asked again: the same kernel_ref, no lookup in the driver.
    CHECK(cache.shared_kernel(first, program, "sim_fill_u32", {}, request()).get() == a.get());
    CHECK(compiler.stats().compiles == 1);
    CHECK(cache.stats().library_loads == 1);

    // A library's kernel is still one context's function: another context's stream is refused before the launch.
    stream other = stream::create(second.ctx);
    device_buffer out = device_buffer::allocate(second.ctx, 64 * sizeof(unsigned));
    CHECK_THROWS_WITH(launch(other, a, launch_config{.grid = 1, .block = 64}, out.data<unsigned>(), 64u, 1u),
                      Catch::Contains("loaded in another context"));
  }
}

TEST_CASE("a library counts its lookups and names an unknown kernel", "[runtime][gpu][library]") {
  const auto compiled = jit::default_compiler().compile(jit::program("fill_library.cu", fill_source),
                                                        device::get(0).compute_capability(), {}, request());
  const library lib = library::load(compiled->bytes(), "fill");
  const primary_context first = primary_context::retain(device::get(0));
  second_context second;
  CHECK(lib.kernel(first, "sim_fill_u32").get() == lib.kernel(first, "sim_fill_u32").get());
  (void)lib.kernel(second.ctx, "sim_fill_u32");
  const library_stats s = lib.stats();
  CHECK(s.kernels == 1);
  CHECK(s.functions == 2);
  CHECK(s.contexts == 2);
  CHECK_THROWS_WITH(lib.kernel(first, "nope"), Catch::Contains("kernel 'nope' in library 'fill'") &&
                                                   Catch::Contains("no such kernel"));
  CHECK_THROWS_WITH(lib.kernel(context_ref(), "sim_fill_u32"), Catch::Contains("empty context"));
  CHECK_THROWS_WITH(library().kernel(first, "sim_fill_u32"), Catch::Contains("empty library"));
  CHECK_THROWS_WITH(library::load(std::vector<std::byte>(16), "junk"),
                    Catch::Contains("'junk'") && Catch::Contains("neither CUBIN"));
  // The layout of a library's kernel is known from its function, as a module's is (captured graphs use it).
  const kernel_ref k = lib.kernel(first, "sim_fill_u32");
  CHECK(detail::known_kernel(k.get()) == &k.info());
}

TEST_CASE("a templated kernel linked with a user fragment by nvJitLink runs", "[runtime][gpu][link]") {
  try {
    jit::nvjitlink_library();
  } catch (const jit::nvjitlink_not_found_error& e) {
    WARN("skipped: nvJitLink is not installed here: " << e.cause());
    return;
  }
  if (test::simulated_driver_loaded()) {
    WARN("skipped: the simulated driver loads no CUBIN (a link's output)");
    return;
  }
  const std::vector<jit::program> programs{
      jit::program("apply.cu", R"(
extern __device__ float user_op(float x);
template <typename T>
__global__ void apply(T* data, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] = user_op(data[i]);
}
)").add_name_expression("apply<float>"),
      jit::program("op.cu", "__device__ float user_op(float x) { return x * 2.0f + 1.0f; }\n")};
  kernel_cache cache;
  const primary_context ctx = primary_context::retain(device::get(0));
  const kernel_ref k = cache.linked_kernel(ctx, programs, "apply<float>");
  stream s = stream::create(ctx);
  std::vector<float> host(256);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(i);
  device_buffer buf = device_buffer::allocate(ctx, host.size() * sizeof(float));
  copy_async(s, buf.span(), std::as_bytes(std::span(host)));
  launch(s, k, launch_config{.grid = 1, .block = 256}, buf.data<float>(), 256);
  copy_async(s, std::as_writable_bytes(std::span(host)), buf.span());
  s.synchronize();
  for (std::size_t i = 0; i < host.size(); ++i) REQUIRE(host[i] == static_cast<float>(i) * 2.0f + 1.0f);
  CHECK(cache.stats().library_loads == 1);
  CHECK(cache.linked_kernel(ctx, programs, "apply<float>").get() == k.get());
  CHECK(cache.stats().library_hits == 1);
}

namespace {
const char* scale_source = R"(
template <typename T>
__global__ void scale(T* p, T factor, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] *= factor;
}
)";
}  // namespace

TEST_CASE("a C++ kernel's arguments are checked against its parameter types", "[runtime][gpu][library][types]") {
  const jit::program program = jit::program("scale.cu", scale_source).add_name_expression("scale<float>");
  kernel_cache cache;
  const primary_context ctx = primary_context::retain(device::get(0));
  for (const kernel_ref k : {cache.kernel(ctx, program, "scale<float>", {}, request()),
                             cache.shared_kernel(ctx, program, "scale<float>", {}, request())}) {
    CHECK(k.param_type_names() == std::vector<std::string>{"float*", "float", "int"});
    stream s = stream::create(ctx);
    device_buffer f = device_buffer::allocate(ctx, 64 * sizeof(double));
    const launch_config one{.grid = 1, .block = 64};
    CHECK_THROWS_WITH(launch(s, k, one, f.data<double>(), 2.0f, 64),
                      Catch::Contains("kernel 'scale<float>' parameter 0 is float* but the argument given is double*"));
    CHECK_THROWS_WITH(launch(s, k, one, f.data<float>(), 2, 64),
                      Catch::Contains("parameter 1 is float but the argument given is int"));
    CHECK_THROWS_WITH(launch(s, k, one, f.data<float>(), 2.0f, 64.0f),
                      Catch::Contains("parameter 2 is int but the argument given is float"));
    // What fits: the pointer itself, a CUdeviceptr for it, an unsigned count for an int.
    CHECK_NOTHROW(launch(s, k, one, f.data<float>(), 2.0f, 64));
    CHECK_NOTHROW(launch(s, k, one, f.get(), 2.0f, 64u));
    s.synchronize();
  }
  // An extern "C" kernel has no types in its name: sizes only, as before.
  const kernel_ref fill = cache.kernel(ctx, jit::program("fill_types.cu", fill_source), "sim_fill_u32", {}, request());
  CHECK(fill.param_types().empty());
  stream s = stream::create(ctx);
  device_buffer out = device_buffer::allocate(ctx, 64 * sizeof(unsigned));
  CHECK_NOTHROW(launch(s, fill, launch_config{.grid = 1, .block = 64}, out.data<unsigned>(), 64u, 1.0f));
  s.synchronize();
}
