// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: how many parameters each kernel of a module image takes, read from the image. The driver has no call for
// the count (cuFuncGetParamInfo answers per index), and probing past the last index is an error that compute-sanitizer
// reports on every kernel lookup; the image says it without an error.
#include <cuasync/driver/module.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <string_view>
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

//! Calls `f(name, offset, size)` for each section of a CUBIN (ELF) whose bytes lie inside `image` (bounds checked;
//! a header that does not fit yields nothing).
void for_each_cubin_section(std::span<const std::byte> image,
                            const std::function<void(std::string_view, std::uint64_t, std::uint64_t)>& f);
//! The kinds of fatbin entries.
constexpr std::uint16_t fatbin_ptx = 1, fatbin_elf = 2;
//! Calls `f(kind, payload)` for each entry of a fatbin (a 16-byte header: u32 magic, u16 version, u16 header size,
//! u64 size of what follows; then entries of a u16 kind, u16 version, u32 header size, u64 payload size), compressed
//! ones included as they are. Stops at the first entry that does not fit.
void for_each_fatbin_entry(std::span<const std::byte> image,
                           const std::function<void(std::uint16_t, std::span<const std::byte>)>& f);

}  // namespace cuasync::detail
