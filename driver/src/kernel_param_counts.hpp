#pragma once
// Internal: how many parameters each kernel of a module image takes, read from the image. The driver has no call for
// the count (cuFuncGetParamInfo answers per index), and probing past the last index is an error that compute-sanitizer
// reports on every kernel lookup; the image says it without an error.
#include <cuasync/driver/module.hpp>

#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <unordered_map>

namespace cuasync::detail {

//! A `T` read from `image` at `offset` (unaligned; the caller checked the bounds).
template <class T>
T read_at(std::span<const std::byte> image, std::size_t offset) {
  T v{};
  std::memcpy(&v, image.data() + offset, sizeof v);
  return v;
}

//! Kernel symbol -> parameter count, for CUBIN (the `.nv.info.<kernel>` sections' KPARAM_INFO records), PTX (the
//! `.param`s of each `.entry`) and fatbin (its uncompressed CUBINs). Kernels the image says nothing of (a fatbin with
//! compressed entries only, say) are missing: those are probed. Any bytes are safe to pass.
std::unordered_map<std::string, std::size_t> kernel_param_counts(std::span<const std::byte> image, image_format format);

}  // namespace cuasync::detail
