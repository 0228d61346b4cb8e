// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Kernel packages: how a framework ships JIT kernels. A package is a directory with a manifest
//! (`cuasync.manifest`) and the source and headers it names; it is compiled at run time through the caches, for
//! whatever device it lands on.
//!
//! The manifest has one entry per line; `#` starts a comment, blank lines are ignored, fields are separated by spaces:
//!
//!     package NAME                 the package's name (first, once)
//!     source FILE                  the program's source, relative to the directory (once)
//!     header FILE [as NAME]        a header compiled from memory: `#include "NAME"` (default NAME: FILE) finds it
//!     option TEXT...               an NVRTC option, passed as written ("--use_fast_math", "-DN=4"); one that
//!                                  changes the target (`-arch`, `-rdc`, ...: `refused_extra_option`) is an error
//!     define NAME[=VALUE]          the same as `option -DNAME[=VALUE]`
//!     std STANDARD                 the C++ standard (c++11, c++14, c++17, c++20; default c++17)
//!     kernel NAME                  an entry point with `extern "C"` linkage
//!     template EXPRESSION...       a template instantiation, compiled and found by that expression ("scale<float>")
//!
//! Files are read when the package is loaded (their contents are part of the cache key). Paths may not leave the
//! package's directory, symbolic links and `..` resolved through the filesystem. Errors are
//! `cuda_error(CUDA_ERROR_INVALID_VALUE)`s whose message names the manifest, the line and the problem
//! ("pack/cuasync.manifest:7: unknown entry 'kernal' ...").

#include <cuasync/jit/options.hpp>
#include <cuasync/jit/program.hpp>

#include <filesystem>
#include <source_location>
#include <string>
#include <string_view>
#include <vector>

namespace cuasync::jit {

struct kernel_package {
  //! The manifest's file name inside a package directory.
  static constexpr const char* manifest_name = "cuasync.manifest";

  std::string name;
  std::filesystem::path directory;
  jit::program program{"", ""};           //!< the source, its headers and its template expressions
  compile_options options;
  std::vector<std::string> kernels;        //!< `kernel` entries (extern "C" names)
  std::vector<std::string> templates;      //!< `template` entries (also the program's name expressions)

  //! Every entry point the package declares: its kernels, then its templates.
  std::vector<std::string> entry_points() const;

  //! Reads `directory`/cuasync.manifest and the files it names. @throws cuda_error naming the file, line and problem
  static kernel_package load(const std::filesystem::path& directory,
                             std::source_location where = std::source_location::current());
  //! Parses manifest text as if read from `directory`/`manifest_label` (files are still read from `directory`).
  //! @throws as `load`
  static kernel_package parse(std::string_view manifest, const std::filesystem::path& directory,
                              std::string_view manifest_label = manifest_name,
                              std::source_location where = std::source_location::current());
};

}  // namespace cuasync::jit
