// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuasync inside JAX through XLA's published FFI: one typed handler, `cuasync_kernel_call`, that launches a cuasync
// JIT kernel on the stream XLA gives it. Built at test or install time against the headers of the running jaxlib
// (jax.ffi.include_dir()) and cuasync's C header; it links nothing: libcuasync is reached through the function table
// Python hands over (cuasync_xla_set_api), and CUDA only through cuasync, so no CUDA toolkit or jaxlib library is
// needed to build it. plugins/python/cuasync/jax.py builds, registers and calls it.
//
// Attribute contract (all required; XLA matches them by name):
//   kernels       int64[D]  a cuasync_kernel handle per device ordinal (0: none for that device)
//   grid, block   int64[3]  launch dimensions, each 0..2^32-1 (0 is taken as 1, as cuasync does)
//   shared_memory int64     dynamic shared memory in bytes
//   scalars       uint8[S]  the trailing scalar parameters' bytes, packed back to back
//   scalar_sizes  int64[n]  each scalar's size; they must add up to S
// Operands and results: any number, any dtype and shape, device buffers. The kernel's parameters are, in order,
// each operand's device pointer, each result's device pointer, then the n scalars; cuasync checks count and sizes.
#include "xla/ffi/api/ffi.h"

#include <cuasync/cuasync.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#if CUASYNC_ABI_MINOR < 1
#error "cuasync_xla_ffi.cpp needs cuasync.h 1.1 (cuasync_launch_args.flags, CUASYNC_LAUNCH_UNTRACKED)"
#endif

namespace ffi = xla::ffi;

namespace {

std::atomic<const cuasync_api*> g_api{nullptr};
std::atomic<int> g_runtime_ffi_major{-1}, g_runtime_ffi_minor{-1};  // what XLA's table said at the last call

// ---- the device ordinal from the FFI context ---------------------------------------------------------------------
// XLA_FFI_DeviceOrdinal_Get is newer than some jaxlib headers (and xla::ffi::DeviceOrdinal lives in XLA's internal
// API only), so the table member is found by detection at compile time and by struct_size at run time.

template <typename Api, typename = void>
struct has_device_ordinal : std::false_type {};
template <typename Api>
struct has_device_ordinal<Api, std::void_t<decltype(&Api::XLA_FFI_DeviceOrdinal_Get)>> : std::true_type {};

template <typename Args>
Args* first_arg(XLA_FFI_Error* (*)(Args*));

// The ordinal of the device this call runs on, or -1 where this XLA cannot say.
template <typename Api>
int32_t device_ordinal(const Api* api, XLA_FFI_ExecutionContext* ctx) {
  if constexpr (has_device_ordinal<Api>::value) {
    if (api->struct_size < offsetof(Api, XLA_FFI_DeviceOrdinal_Get) + sizeof(void*) || !api->XLA_FFI_DeviceOrdinal_Get)
      return -1;  // a runtime older than the headers
    using Args = std::remove_pointer_t<decltype(first_arg(api->XLA_FFI_DeviceOrdinal_Get))>;
    Args args;
    std::memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;  // >= its STRUCT_SIZE, which is all XLA checks
    args.ctx = ctx;
    if (XLA_FFI_Error* e = api->XLA_FFI_DeviceOrdinal_Get(&args)) {
      XLA_FFI_Error_Destroy_Args d;
      std::memset(&d, 0, sizeof d);
      d.struct_size = XLA_FFI_Error_Destroy_Args_STRUCT_SIZE;
      d.error = e;
      api->XLA_FFI_Error_Destroy(&d);
      return -1;
    }
    return args.device_ordinal;
  } else {
    (void)api, (void)ctx;
    return -1;
  }
}

// What the handler learns from the call frame besides the stream: decoded as a context value, the FFI's own
// extension point for that (CtxDecoding), so the typed binding stays the usual one.
struct call_site {
  int32_t device;  // -1: unknown
  int ffi_major, ffi_minor;
};
struct call_site_tag {};

}  // namespace

template <>
struct ffi::CtxDecoding<call_site_tag> {
  using Type = call_site;
  static std::optional<Type> Decode(const XLA_FFI_Api* api, XLA_FFI_ExecutionContext* ctx, ffi::DiagnosticEngine&) {
    return call_site{device_ordinal(api, ctx), api->api_version.major_version, api->api_version.minor_version};
  }
};

namespace {

ffi::ErrorCode xla_code(cuasync_error_code code) {
  switch (code) {
    case CUASYNC_ERROR_INVALID_ARGUMENT:
    case CUASYNC_ERROR_STALE_HANDLE: return ffi::ErrorCode::kInvalidArgument;
    case CUASYNC_ERROR_UNSUPPORTED: return ffi::ErrorCode::kUnimplemented;
    case CUASYNC_ERROR_OUT_OF_MEMORY: return ffi::ErrorCode::kResourceExhausted;
    case CUASYNC_ERROR_BUSY: return ffi::ErrorCode::kUnavailable;
    case CUASYNC_ERROR_NO_DRIVER: return ffi::ErrorCode::kFailedPrecondition;
    default: return ffi::ErrorCode::kInternal;
  }
}

// Every message starts the same way, so that Python (and a person reading a JAX traceback) can tell the handler's
// own refusals from XLA's ("no handler registered...").
std::string where(int32_t device, int64_t kernel) {
  return "cuasync XLA FFI handler: kernel handle " + std::to_string(kernel) + " on device " + std::to_string(device);
}

// Turns a cuasync_error into an FFI error (and frees it).
ffi::Error failed(const cuasync_api* api, cuasync_error* e, const std::string& what) {
  cuasync_error_info_args info;
  std::memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = e;
  api->error_info(&info);
  ffi::Error out(xla_code(info.code), what + ": " + std::string(info.message, info.message_size));
  api->error_destroy(e);
  return out;
}

// XLA's streams live as long as its executors, so each is adopted once. Adopting reads the stream's context, which
// a launch then checks against the kernel's.
std::mutex g_streams_mutex;
std::unordered_map<void*, cuasync_stream> g_streams;

cuasync_error* adopted(const cuasync_api* api, void* native, cuasync_stream* out) {
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  auto it = g_streams.find(native);
  if (it != g_streams.end()) return *out = it->second, nullptr;
  cuasync_stream_create_args a;
  std::memset(&a, 0, sizeof a);
  a.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  a.native = native;
  if (cuasync_error* e = api->stream_create(&a)) return e;
  g_streams.emplace(native, a.stream);
  return *out = a.stream, nullptr;
}

bool to_u32(int64_t v, uint32_t* out) {
  if (v < 0 || v > static_cast<int64_t>(UINT32_MAX)) return false;
  return *out = static_cast<uint32_t>(v), true;
}

ffi::Error invalid(std::string message) { return ffi::Error(ffi::ErrorCode::kInvalidArgument, std::move(message)); }

ffi::Error launch(void* stream, call_site site, ffi::RemainingArgs inputs, ffi::RemainingRets outputs,
                  ffi::Span<const int64_t> kernels, ffi::Span<const int64_t> grid, ffi::Span<const int64_t> block,
                  int64_t shared_memory, ffi::Span<const uint8_t> scalars, ffi::Span<const int64_t> scalar_sizes) {
  g_runtime_ffi_major.store(site.ffi_major, std::memory_order_relaxed);
  g_runtime_ffi_minor.store(site.ffi_minor, std::memory_order_relaxed);
  const cuasync_api* api = g_api.load(std::memory_order_acquire);
  if (!api)
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                      "cuasync XLA FFI handler: called before cuasync_xla_set_api (register it with "
                      "cuasync.jax.build_handler(), which hands it libcuasync's table)");
  if (site.ffi_major != XLA_FFI_API_MAJOR)
    return ffi::Error(ffi::ErrorCode::kFailedPrecondition,
                      "cuasync XLA FFI handler: built for XLA FFI API " + std::to_string(XLA_FFI_API_MAJOR) + "." +
                          std::to_string(XLA_FFI_API_MINOR) + " but XLA runs " + std::to_string(site.ffi_major) +
                          "." + std::to_string(site.ffi_minor) + "; rebuild it (cuasync.jax.build_handler)");

  // The device: from the context; where XLA cannot say, the one device a kernel was given for.
  int32_t device = site.device;
  if (device < 0) {
    int found = 0;
    for (size_t i = 0; i < kernels.size(); ++i)
      if (kernels[i] != 0) device = static_cast<int32_t>(i), ++found;
    if (found != 1)
      return invalid("cuasync XLA FFI handler: this XLA does not report the device ordinal to FFI handlers, and "
                     "`kernels` names " + std::to_string(found) + " devices: give a kernel for exactly one device");
  }
  const int64_t kernel = static_cast<size_t>(device) < kernels.size() ? kernels[device] : 0;
  const std::string at = where(device, kernel);
  if (kernel == 0)
    return invalid("cuasync XLA FFI handler: no kernel for device " + std::to_string(device) + " (`kernels` has " +
                   std::to_string(kernels.size()) + " entries; give a kernel compiled in each device's runtime)");

  cuasync_launch_args la;
  std::memset(&la, 0, sizeof la);
  la.struct_size = CUASYNC_STRUCT_SIZE(cuasync_launch_args, flags);
  la.kernel = reinterpret_cast<cuasync_kernel>(static_cast<uintptr_t>(kernel));
  if (grid.size() != 3 || block.size() != 3)
    return invalid(at + ": `grid` and `block` need 3 entries each (got " + std::to_string(grid.size()) + " and " +
                   std::to_string(block.size()) + ")");
  for (int i = 0; i < 3; ++i)
    if (!to_u32(grid[i], &la.grid[i]) || !to_u32(block[i], &la.block[i]))
      return invalid(at + ": grid and block entries must be 0..2^32-1");
  if (!to_u32(shared_memory, &la.shared_memory_bytes))
    return invalid(at + ": shared_memory must be 0..2^32-1 bytes");

  // Parameters: operand pointers, result pointers, then the scalars (read by launch during the call only).
  const size_t num_buffers = inputs.size() + outputs.size();
  std::vector<void*> pointers(num_buffers);
  std::vector<cuasync_kernel_arg> args(num_buffers + scalar_sizes.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto b = inputs.get<ffi::AnyBuffer>(i);
    if (!b) return invalid(at + ": operand " + std::to_string(i) + ": " + b.error().message());
    pointers[i] = b->untyped_data();
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto b = outputs.get<ffi::AnyBuffer>(i);
    if (!b) return invalid(at + ": result " + std::to_string(i) + ": " + b.error().message());
    pointers[inputs.size() + i] = (*b)->untyped_data();
  }
  for (size_t i = 0; i < num_buffers; ++i) args[i] = cuasync_kernel_arg{&pointers[i], sizeof(void*)};
  size_t offset = 0;
  for (size_t i = 0; i < scalar_sizes.size(); ++i) {
    const int64_t n = scalar_sizes[i];
    if (n <= 0 || static_cast<uint64_t>(n) > scalars.size() - offset)
      return invalid(at + ": scalar " + std::to_string(i) + " has size " + std::to_string(n) + " but `scalars` has " +
                     std::to_string(scalars.size() - offset) + " byte(s) left");
    args[num_buffers + i] = cuasync_kernel_arg{scalars.begin() + offset, static_cast<size_t>(n)};
    offset += static_cast<size_t>(n);
  }
  if (offset != scalars.size())
    return invalid(at + ": `scalars` has " + std::to_string(scalars.size()) + " bytes but `scalar_sizes` adds up to " +
                   std::to_string(offset));
  la.args = args.data();
  la.num_args = args.size();

  // XLA orders its stream itself (and owns the buffers' lifetimes), so the launch is untracked: checked, enqueued,
  // no admission place, no event, no completion.
  la.flags = CUASYNC_LAUNCH_UNTRACKED;
  if (cuasync_error* e = adopted(api, stream, &la.stream)) return failed(api, e, at + ": adopting XLA's stream");
  if (cuasync_error* e = api->launch(&la)) return failed(api, e, at);
  return ffi::Error::Success();
}

// No exception may cross into XLA (it would end the process): an allocation failure is an error like any other.
ffi::Error kernel_call(void* stream, call_site site, ffi::RemainingArgs inputs, ffi::RemainingRets outputs,
                       ffi::Span<const int64_t> kernels, ffi::Span<const int64_t> grid, ffi::Span<const int64_t> block,
                       int64_t shared_memory, ffi::Span<const uint8_t> scalars,
                       ffi::Span<const int64_t> scalar_sizes) {
  try {
    return launch(stream, site, inputs, outputs, kernels, grid, block, shared_memory, scalars, scalar_sizes);
  } catch (const std::exception& e) {
    return ffi::Error(ffi::ErrorCode::kInternal, std::string("cuasync XLA FFI handler: ") + e.what());
  } catch (...) {
    return ffi::Error(ffi::ErrorCode::kInternal, "cuasync XLA FFI handler: an unknown exception");
  }
}

}  // namespace

extern "C" {

// Hands the handler libcuasync's function table (cuasync._capi.api_address()). 0: accepted; 1: NULL; 2: another ABI
// major; 3: a table without the calls used here; 4: a library older than ABI 1.1 (no untracked launches).
__attribute__((visibility("default"))) int cuasync_xla_set_api(const void* table) {
  const auto* api = static_cast<const cuasync_api*>(table);
  if (!api) return 1;
  if (api->abi_major != CUASYNC_ABI_MAJOR) return 2;
  if (api->struct_size < CUASYNC_STRUCT_SIZE(cuasync_api, launch)) return 3;
  if (api->abi_minor < 1) return 4;
  std::lock_guard<std::mutex> lock(g_streams_mutex);
  if (g_api.exchange(api, std::memory_order_acq_rel) != api) g_streams.clear();  // another library's handles
  return 0;
}

// The XLA FFI API version this file was compiled against (its jaxlib's headers), and the one XLA's table reported at
// the last call of the handler (-1 before any): Python compares them after registering.
__attribute__((visibility("default"))) void cuasync_xla_ffi_api_version(int* compiled_major, int* compiled_minor,
                                                                        int* runtime_major, int* runtime_minor) {
  *compiled_major = XLA_FFI_API_MAJOR;
  *compiled_minor = XLA_FFI_API_MINOR;
  *runtime_major = g_runtime_ffi_major.load(std::memory_order_relaxed);
  *runtime_minor = g_runtime_ffi_minor.load(std::memory_order_relaxed);
}

}  // extern "C"

XLA_FFI_DEFINE_HANDLER_SYMBOL(cuasync_kernel_call, kernel_call,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .Ctx<call_site_tag>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<ffi::Span<const int64_t>>("kernels")
                                  .Attr<ffi::Span<const int64_t>>("grid")
                                  .Attr<ffi::Span<const int64_t>>("block")
                                  .Attr<int64_t>("shared_memory")
                                  .Attr<ffi::Span<const uint8_t>>("scalars")
                                  .Attr<ffi::Span<const int64_t>>("scalar_sizes"));
