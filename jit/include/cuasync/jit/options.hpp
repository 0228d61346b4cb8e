// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Compile options: the ones a framework sets, spelled as fields, plus raw NVRTC options. They turn into NVRTC's
//! argument list for a given target; every field is part of the cache key.

#include <cuasync/jit/target.hpp>

#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cuasync::jit {

//! How to compile. Plain data: copy, compare and hash it freely.
struct compile_options {
  std::string standard = "c++17";  //!< `--std=`: c++11, c++14, c++17, c++20
  std::vector<std::pair<std::string, std::string>> defines;  //!< `-D name=value` (`-D name` when value is empty)
  //! `-I dir`, searched before the toolkit's. The cache key covers these paths but not the files read from them
  //! (NVRTC cannot report which files it read): pass a header that changes between runs with
  //! `program::add_header`, whose contents are part of the key.
  std::vector<std::string> include_paths;
  bool toolkit_includes = true;      //!< add the toolkit's `include` and `include/cccl` (found at run time)
  bool fast_math = false;            //!< `--use_fast_math`
  std::optional<bool> fmad;          //!< `--fmad=true|false` (NVRTC's default: true)
  bool line_info = false;            //!< `--generate-line-info`
  bool debug = false;                //!< `--device-debug`
  bool relocatable_device_code = false;  //!< `--relocatable-device-code=true`
  std::optional<int> max_registers;  //!< `--maxrregcount=N`
  //! Precompiled headers (`--pch`): NVRTC saves the headers' parsed state in the compiler's PCH directory (under the
  //! cache) and reuses it when a later program includes the same headers. Pays off for header-heavy kernels.
  bool precompiled_headers = false;
  //! Raw NVRTC options, passed last, unchanged. Options that change what is produced (`-arch`, `-code`, `-rdc`,
  //! `-dc`, `-dlto`, `-optix-ir`, ...) are refused: the target and the fields above choose that.
  std::vector<std::string> extra;

  //! Adds `-D name=value`. Returns *this for chaining.
  compile_options& define(std::string name, std::string value = {}) {
    defines.emplace_back(std::move(name), std::move(value));
    return *this;
  }
  //! Adds `-I dir`.
  compile_options& include(std::string dir) {
    include_paths.push_back(std::move(dir));
    return *this;
  }

  //! Refuses options that cannot be compiled as asked (the compiler checks before it looks in its caches).
  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) for an empty define name, a non-positive register count or an
  //! `extra` option that `refused_extra_option` refuses.
  void check(std::source_location where = std::source_location::current()) const;

  //! NVRTC's argument list for `t`. `pch_dir` is used when `precompiled_headers` is set (empty: NVRTC's default).
  //! @throws as `check`.
  std::vector<std::string> arguments(const target& t, const std::string& pch_dir = {},
                                     std::source_location where = std::source_location::current()) const;

  friend bool operator==(const compile_options&, const compile_options&) = default;
};

//! Why `option`, one entry of `compile_options::extra`, is refused ("'-arch=sm_80' changes what NVRTC produces ...",
//! with what to use instead), or empty when it is not: such an option would override the target chosen for the device.
std::string refused_extra_option(std::string_view option);

}  // namespace cuasync::jit
