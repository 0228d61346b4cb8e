// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// What modules and libraries share when a kernel is first asked for: its layout read once (parameters from the
// image's count or probed, the device's limits), and the registry behind detail::known_kernel.
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/module.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <source_location>
#include <string>
#include <unordered_map>
#include <vector>

namespace cuasync::detail {

//! The layout of `function`, kernel `symbol` (named `name` in messages) in `ctx`: parameter offsets and sizes
//! (`cuFuncGetParamInfo`, `param_counts[symbol]` of them when the image says, else probed), the device's limits and
//! the kernel's own thread limit. The current context must be `ctx`. @throws cuda_error
std::unique_ptr<kernel_info> describe_kernel(CUfunction function, std::string name, const std::string& symbol,
                                             context_ref ctx,
                                             const std::unordered_map<std::string, std::size_t>& param_counts,
                                             std::source_location where);
//! Refuses an image that is empty, of no known format or structurally corrupt (the driver trusts its offsets),
//! naming `label` and `api`; returns its format. @throws cuda_error
image_format check_image(std::span<const std::byte> image, const std::string& label, const char* api,
                         std::source_location where);
//! The image in 8-byte-aligned memory with a NUL after it: what the driver's loaders want.
std::vector<std::uint64_t> aligned_copy(std::span<const std::byte> image);
//! Makes `known_kernel(k->function)` answer `k` (until `forget_kernel(k)`).
void remember_kernel(const kernel_info* k);
//! Undoes `remember_kernel(k)`, unless a later kernel took its function handle.
void forget_kernel(const kernel_info* k) noexcept;

}  // namespace cuasync::detail
