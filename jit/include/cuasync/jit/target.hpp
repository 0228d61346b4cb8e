// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! What to compile for. For a device of compute capability XY: a CUBIN for the exact `sm_XY` when NVRTC supports
//! it, otherwise PTX for the highest `compute_ZW` NVRTC supports that the device can run (so a GPU newer than NVRTC
//! never meets "invalid value for --gpu-architecture"). And the check that a PTX image is not newer than the driver
//! can JIT (which would fail with `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`). Pure functions: no GPU, no driver needed.

#include <cuasync/jit/error.hpp>

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace cuasync::jit {

//! The kind of code NVRTC produces.
enum class output_kind : unsigned char {
  cubin,  //!< machine code for one `sm_XX` (loads in ~0.1 ms)
  ptx,    //!< PTX for `compute_XX`, JIT-compiled by the driver at load time (up to ~110 ms), runs on XX and newer
  ltoir,  //!< LTO-IR (`-dlto`) for `compute_XX`, for linking with nvJitLink; not loadable as a module by itself
};
const char* to_string(output_kind k) noexcept;

//! An output kind and an architecture (major * 10 + minor: 90 = sm_90 / compute_90).
struct target {
  output_kind kind = output_kind::cubin;
  int arch = 0;

  //! The `--gpu-architecture` value: `sm_90` for CUBIN, `compute_90` for PTX and LTO-IR.
  std::string architecture() const;
  //! e.g. "CUBIN sm_90", "PTX compute_90".
  std::string to_string() const;
  friend bool operator==(const target&, const target&) = default;
};

//! What the caller asks for.
enum class output_request : unsigned char {
  automatic,  //!< CUBIN for the exact arch when supported, else PTX
  ptx,        //!< PTX even when a CUBIN could be made (e.g. to exercise the driver's JIT, or for portability)
  ltoir,      //!< LTO-IR
};

//! Picks the target for a device of compute capability `compute_capability` (major * 10 + minor) given the
//! architectures NVRTC supports (`nvrtc_info::supported_archs`).
//! @throws unsupported_architecture_error when the device is older than every supported architecture (a newer
//! NVRTC dropped it), naming the oldest supported one and what to do.
target select_target(int compute_capability, std::span<const int> supported_archs,
                     output_request request = output_request::automatic,
                     std::source_location where = std::source_location::current());
//! The same with the loaded NVRTC's architectures. @throws nvrtc_not_found_error, unsupported_architecture_error
target select_target(int compute_capability, output_request request = output_request::automatic,
                     std::source_location where = std::source_location::current());

//! A PTX ISA version, e.g. {9, 0}.
struct ptx_isa {
  int major = 0;
  int minor = 0;
  int value() const noexcept { return major * 10 + minor; }
  std::string to_string() const { return std::to_string(major) + "." + std::to_string(minor); }
  friend auto operator<=>(const ptx_isa& a, const ptx_isa& b) noexcept { return a.value() <=> b.value(); }
  friend bool operator==(const ptx_isa&, const ptx_isa&) = default;
};

//! The `.version X.Y` directive of a PTX text, or nothing when there is none.
std::optional<ptx_isa> parse_ptx_isa(std::string_view ptx) noexcept;

//! The newest PTX ISA a driver of CUDA version `driver_version` (`cuDriverGetVersion`, e.g. 13000) can JIT:
//! CUDA 11.x → 7.x, 12.0 → 8.0, ..., 12.5 and 12.6 → 8.5, 12.8 → 8.7, 12.9 → 8.8, 13.0 → 9.0. A driver newer than
//! this table knows is assumed to JIT everything up to the newest ISA the table knows, and newer.
ptx_isa max_ptx_isa_for_driver(int driver_version) noexcept;

//! The oldest CUDA version whose driver can JIT `isa` (for messages), e.g. "12.8".
std::string driver_version_for_ptx_isa(ptx_isa isa);

//! Refuses a PTX that the driver of `driver_version` cannot JIT.
//! @throws ptx_too_new_error saying the PTX ISA, the driver's CUDA version, the newest ISA it takes and what to do
//! (update the driver to the version named, or compile with an older NVRTC through `CUASYNC_LIBNVRTC`);
//! cuda_error(CUDA_ERROR_INVALID_IMAGE) when the text has no `.version` directive.
void check_ptx_loadable(std::string_view ptx, int driver_version, std::string_view label = "<ptx>",
                        std::source_location where = std::source_location::current());

}  // namespace cuasync::jit
