// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: which kernels of a module image wait on the grid they depend on (`griddepcontrol.wait`), the condition
// under which cuasync lets a kernel start before its predecessor on the stream ends (launch_config::dependent_launch).
#include <cuasync/driver/module.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <unordered_set>

namespace cuasync::detail {

//! The kernels (by symbol) whose code in `image` holds the wait: in PTX, `griddepcontrol.wait` in the `.entry`'s body;
//! in a CUBIN for sm_90 to sm_12x, the instruction it compiles to in the kernel's `.text.<kernel>` section (opcode
//! 0x82e in the low 12 bits of a 128-bit instruction, the same on every one of those architectures); in a fatbin, a
//! kernel that some readable entry shows waiting and none shows not waiting. CUBINs of other architectures, and
//! compressed entries, say nothing: their kernels are left out (launched without PDL). Any bytes are safe to pass.
std::unordered_set<std::string> grid_dependency_kernels(std::span<const std::byte> image, image_format format);

}  // namespace cuasync::detail
