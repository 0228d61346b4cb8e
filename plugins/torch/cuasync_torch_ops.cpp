// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuasync's PyTorch ops with C++ dispatch: `torch.ops.cuasync.scale_add` goes from PyTorch's dispatcher through the
// autograd kernel here (C++ as well: an autograd formula registered from Python is a Python call on every call, grad
// or not, ~4 us on the H200) to the CUDA implementation, which launches a cuasync JIT kernel on PyTorch's current
// stream through the C ABI, untracked (PyTorch orders its streams itself; nothing is recorded, so it is safe inside
// `torch.cuda.graph`). The Python `torch.library.custom_op` fallback pays Python dispatch on every call (~4x
// `torch.add`); this path pays the dispatcher's. plugins/python/cuasync/torch.py builds this file against the running
// torch's headers (cached by a hash of this source, cuasync.h and torch's version), hands it libcuasync's function
// table and registers the fake (meta) implementation in Python (torch.compile and opcheck trace with it).
//
// It is also the template for ops of your own: the kernel's source lives here, compiled for each device on its first
// use (or in warm_up, which a CUDA graph capture needs beforehand) through cuasync's memory and disk caches.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cuasync/cuasync.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#if CUASYNC_ABI_MINOR < 1
#error "cuasync_torch_ops.cpp needs cuasync.h 1.1 (CUASYNC_LAUNCH_UNTRACKED)"
#endif

namespace {

// Kept identical to the Python fallback's (cuasync/torch.py), so both paths give PyTorch's eager results.
constexpr const char* scale_add_source = R"(
extern "C" __global__ void scale_add_f32(const float* x, const float* y, float* out, float alpha, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) out[i] = alpha * x[i] + y[i];
}
)";
constexpr const char* scale_add_options[] = {"--fmad=false"};  // each operation rounded, as alpha * x + y eagerly
constexpr unsigned block_threads = 256;
constexpr int max_devices = 64;

std::atomic<const cuasync_api*> g_api{nullptr};

// Raises a c10::Error (Python sees RuntimeError) with the call and cuasync's own message, and frees the error.
[[noreturn]] void fail(const cuasync_api* api, cuasync_error* e, const std::string& what) {
  cuasync_error_info_args info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = e;
  api->error_info(&info);
  std::string message(info.message, info.message_size);
  api->error_destroy(e);
  TORCH_CHECK(false, "cuasync::scale_add: ", what, ": ", message);
}

const cuasync_api* api_or_throw() {
  const cuasync_api* api = g_api.load(std::memory_order_acquire);
  TORCH_CHECK(api, "cuasync::scale_add: called before cuasync_torch_ops_set_api (load it with cuasync.torch, which "
                   "hands it libcuasync's table)");
  return api;
}

// One device's runtime and kernel, and the cuasync handles of PyTorch's streams on it. PyTorch's streams come from
// pools it never destroys, so each is adopted once.
struct device_state {
  cuasync_runtime runtime = nullptr;
  cuasync_module module = nullptr;
  cuasync_kernel kernel = nullptr;
  std::mutex streams_mutex;
  std::unordered_map<void*, cuasync_stream> streams;
};

std::mutex g_devices_mutex;  // creating a device's state (its compile: once per device and process)
std::array<std::atomic<device_state*>, max_devices> g_devices{};

device_state& state_for(int device) {
  TORCH_CHECK(device >= 0 && device < max_devices, "cuasync::scale_add: device ", device, " out of range");
  if (device_state* d = g_devices[device].load(std::memory_order_acquire)) return *d;
  const cuasync_api* api = api_or_throw();
  std::lock_guard<std::mutex> lock(g_devices_mutex);
  if (device_state* d = g_devices[device].load(std::memory_order_acquire)) return *d;
  auto d = std::make_unique<device_state>();
  cuasync_runtime_create_args rc;
  std::memset(&rc, 0, sizeof rc);
  rc.struct_size = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
  rc.device = device;
  if (cuasync_error* e = api->runtime_create(&rc)) fail(api, e, "runtime_create(device " + std::to_string(device) + ")");
  d->runtime = rc.runtime;
  cuasync_compile_args cc;
  std::memset(&cc, 0, sizeof cc);
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = d->runtime;
  cc.name = "cuasync_torch_ops.cu";
  cc.source = scale_add_source;
  cc.options = scale_add_options;
  cc.num_options = sizeof scale_add_options / sizeof scale_add_options[0];
  if (cuasync_error* e = api->compile(&cc)) fail(api, e, "compile");
  d->module = cc.module;
  cuasync_kernel_get_args kg;
  std::memset(&kg, 0, sizeof kg);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.module = d->module;
  kg.name = "scale_add_f32";
  if (cuasync_error* e = api->kernel_get(&kg)) fail(api, e, "kernel_get(scale_add_f32)");
  d->kernel = kg.kernel;
  // Never destroyed: the ops live as long as the process (the runtime, like PyTorch's own context, to its end).
  device_state* made = d.release();
  g_devices[device].store(made, std::memory_order_release);
  return *made;
}

// The cuasync handle of PyTorch's current stream on the device. The default stream (handle 0 to PyTorch) is the
// legacy default stream of the device's primary context: adopted as CU_STREAM_LEGACY in the device's runtime.
cuasync_stream stream_for(const cuasync_api* api, device_state& d, void* native) {
  thread_local void* last_native = nullptr;
  thread_local cuasync_stream last_stream = nullptr;
  thread_local const device_state* last_device = nullptr;
  if (last_device == &d && last_native == native && last_stream) return last_stream;
  std::lock_guard<std::mutex> lock(d.streams_mutex);
  auto it = d.streams.find(native);
  if (it == d.streams.end()) {
    cuasync_stream_create_args a;
    std::memset(&a, 0, sizeof a);
    a.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
    a.runtime = d.runtime;
    a.native = native ? native : reinterpret_cast<void*>(1);  // (void*)1: CU_STREAM_LEGACY of the runtime's context
    if (cuasync_error* e = api->stream_create(&a)) fail(api, e, "adopting PyTorch's current stream");
    it = d.streams.emplace(native, a.stream).first;
  }
  last_device = &d, last_native = native, last_stream = it->second;
  return it->second;
}

void check_inputs(const at::Tensor& x, const at::Tensor& y) {
  TORCH_CHECK(x.sizes() == y.sizes(), "cuasync::scale_add: shapes ", x.sizes(), " and ", y.sizes());
  TORCH_CHECK(x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat,
              "cuasync::scale_add: float32 tensors only, got ", x.scalar_type(), " and ", y.scalar_type());
  TORCH_CHECK(x.device() == y.device(), "cuasync::scale_add: devices ", x.device(), " and ", y.device());
}

at::Tensor scale_add_cuda(const at::Tensor& x, const at::Tensor& y, double alpha) {
  check_inputs(x, y);
  const at::Tensor xc = x.contiguous(), yc = y.contiguous();
  at::Tensor out = at::empty_like(xc, at::MemoryFormat::Contiguous);
  const long long n = xc.numel();
  if (n == 0) return out;
  const int device = x.get_device();
  const cuasync_api* api = api_or_throw();
  device_state& d = state_for(device);
  cuasync_stream s = stream_for(api, d, c10::cuda::getCurrentCUDAStream(device).stream());
  const void* px = xc.data_ptr();
  const void* py = yc.data_ptr();
  void* pout = out.data_ptr();
  const float a = static_cast<float>(alpha);
  const cuasync_kernel_arg args[] = {{&px, sizeof px}, {&py, sizeof py}, {&pout, sizeof pout}, {&a, sizeof a},
                                     {&n, sizeof n}};
  const unsigned long long blocks = (static_cast<unsigned long long>(n) + block_threads - 1) / block_threads;
  TORCH_CHECK(blocks <= 0x7fffffffULL, "cuasync::scale_add: ", n, " elements need more blocks than a grid holds");
  cuasync_launch_args l;
  std::memset(&l, 0, sizeof l);
  l.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  l.stream = s;
  l.kernel = d.kernel;
  l.grid[0] = static_cast<uint32_t>(blocks);
  l.block[0] = block_threads;
  l.args = args;
  l.num_args = sizeof args / sizeof args[0];
  l.flags = CUASYNC_LAUNCH_UNTRACKED;
  if (cuasync_error* e = api->launch(&l)) fail(api, e, "launch");
  return out;
}

// The op below autograd: the dispatcher's next kernel (CUDA here; the fake implementation under torch.compile).
at::Tensor scale_add_below_autograd(const at::Tensor& x, const at::Tensor& y, double alpha) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("cuasync::scale_add", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, double)>();
  at::AutoDispatchBelowADInplaceOrView below;
  return op.call(x, y, alpha);
}

// d(alpha * x + y) = alpha * dx + dy.
struct scale_add_function : torch::autograd::Function<scale_add_function> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y,
                            double alpha) {
    ctx->saved_data["alpha"] = alpha;
    return scale_add_below_autograd(x, y, alpha);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const double alpha = ctx->saved_data["alpha"].toDouble();
    return {grads[0] * alpha, grads[0], at::Tensor()};
  }
};

// Without a gradient to record (inference, no_grad) the call goes straight below autograd: Function::apply makes a
// graph node on every call, which the common case does not need.
at::Tensor scale_add_autograd(const at::Tensor& x, const at::Tensor& y, double alpha) {
  if (!at::GradMode::is_enabled() || (!x.requires_grad() && !y.requires_grad()))
    return scale_add_below_autograd(x, y, alpha);
  return scale_add_function::apply(x, y, alpha);
}

}  // namespace

TORCH_LIBRARY(cuasync, m) {
  m.def("scale_add(Tensor x, Tensor y, float alpha) -> Tensor");
}
TORCH_LIBRARY_IMPL(cuasync, CUDA, m) { m.impl("scale_add", &scale_add_cuda); }
TORCH_LIBRARY_IMPL(cuasync, Autograd, m) { m.impl("scale_add", &scale_add_autograd); }

extern "C" {

// Hands over libcuasync's table (cuasync._capi.api_address()). 0: taken; 1: NULL; 2: another ABI major; 3: a table
// without launch; 4: ABI 1.0 (untracked launches need 1.1).
__attribute__((visibility("default"))) int cuasync_torch_ops_set_api(const void* table) {
  const auto* api = static_cast<const cuasync_api*>(table);
  if (!api) return 1;
  if (api->abi_major != CUASYNC_ABI_MAJOR) return 2;
  if (api->struct_size < CUASYNC_STRUCT_SIZE(cuasync_api, launch)) return 3;
  if (api->abi_minor < 1) return 4;
  g_api.store(api, std::memory_order_release);
  return 0;
}

// Compiles and loads the kernel for `device` now (a CUDA graph capture must not compile). 0, or -1 with the message
// in `message` (at most `size` bytes, terminated).
__attribute__((visibility("default"))) int cuasync_torch_ops_warm_up(int device, char* message, size_t size) {
  try {
    state_for(device);
    return 0;
  } catch (const c10::Error& e) {
    if (size) std::snprintf(message, size, "%s", e.what_without_backtrace());  // what() adds the C++ backtrace
  } catch (const std::exception& e) {
    if (size) std::snprintf(message, size, "%s", e.what());
  }
  return -1;
}

}  // extern "C"
