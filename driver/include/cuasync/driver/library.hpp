// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Context-independent libraries (CUDA 12+): code loaded once per process with `cuLibraryLoadData`, whose kernels
//! are used in every context, on every device, that runs them. Each kernel is looked up once
//! (`cuLibraryGetKernel`), and its function once per context (`cuKernelGetFunction`, which the driver answers by
//! loading the code into that context on first use); the `kernel_ref`s are cached per context. A second context or
//! device compiles nothing and loads no module. `module` stays for frameworks that need a `CUmodule`.

#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/module.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace cuasync {

namespace detail {
struct library_state;
}

//! Counters of one library.
struct library_stats {
  std::uint64_t kernels = 0;    //!< kernels looked up (`cuLibraryGetKernel`): once per kernel
  std::uint64_t functions = 0;  //!< functions looked up (`cuKernelGetFunction`): once per kernel and context
  std::uint64_t contexts = 0;   //!< distinct contexts that asked for one of its kernels
};

//! An owned, loaded library. Move-only; unloading (`cuLibraryUnload`, which needs no context) invalidates every
//! `kernel_ref` it gave, in every context. Thread-safe.
class library {
 public:
  library() = default;
  //! Loads an image (CUBIN, fatbin or PTX, checked as `module::load` checks it) for the process. Needs no context:
  //! the driver loads it into a context when a kernel of it is first asked for there. `label` names it in errors.
  //! @throws cuda_error naming the format and size; for PTX, with the JIT's error log.
  static library load(std::span<const std::byte> image, std::string label = "<memory>",
                      std::source_location where = std::source_location::current());

  library(library&& o) noexcept;
  library& operator=(library&& o) noexcept;
  library(const library&) = delete;
  library& operator=(const library&) = delete;
  ~library();

  //! The kernel named `name` (an `extern "C"` name, a mangled name or a registered name expression) in `ctx`:
  //! `cuLibraryGetKernel` the first time the name is asked for, `cuKernelGetFunction` the first time in each
  //! context (by `cuCtxGetId`, so a context created under a gone one's handle asks again), then cached: later calls
  //! cost a lock, the context's id and two lookups.
  //! @throws cuda_error for an empty library or context, and `CUDA_ERROR_NOT_FOUND` naming the kernel and library.
  kernel_ref kernel(context_ref ctx, std::string_view name,
                    std::source_location where = std::source_location::current()) const;
  //! Makes `kernel(ctx, expression)` find the kernel whose symbol is `lowered_name` (NVRTC name expressions).
  //! @throws cuda_error for an empty library
  void add_name_alias(std::string expression, std::string lowered_name,
                      std::source_location where = std::source_location::current()) const;

  CUlibrary get() const noexcept;
  explicit operator bool() const noexcept { return state_ != nullptr; }
  //! The library's label, for messages.
  const std::string& label() const noexcept;
  library_stats stats() const noexcept;

 private:
  explicit library(detail::library_state* s) noexcept : state_(s) {}
  detail::library_state* state_ = nullptr;
};

}  // namespace cuasync
