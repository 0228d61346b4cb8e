// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `kernel_cache`: the bridge between jit/ and driver/. "Give me kernel K of this program for this context"
//! picks the target from the context's device (CUBIN for its exact arch when NVRTC supports it, else PTX), compiles
//! or hits the compiler's memory and disk caches, refuses a PTX newer than the driver can JIT, loads the module into
//! the context once, registers the program's name expressions with the module, and returns the kernel.

#include <cuasync/driver/context.hpp>
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/library.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/program.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <utility>

namespace cuasync::runtime {

//! Counters of a `kernel_cache`.
struct kernel_cache_stats {
  std::uint64_t module_hits = 0;   //!< requests answered by a module already loaded in the context
  std::uint64_t module_loads = 0;  //!< modules loaded (one per program, options, target and context)
  std::uint64_t library_hits = 0;   //!< `shared_kernel` / `linked_kernel` requests answered by a library loaded already
  std::uint64_t library_loads = 0;  //!< libraries loaded (one per program or link, options and target: any context)
};

//! Compiled-and-loaded modules per context. Thread-safe. Owns the modules; `kernel_ref`s it returned are valid while
//! it and their context live. Contexts are told apart by id, so one cache serves contexts that come and go: a
//! context created with a gone one's handle loads its own modules, and the gone ones' are never unloaded (they went
//! with their context).
class kernel_cache {
 public:
  //! Compiles through `compiler` (which must outlive this object); the process's compiler by default.
  //! @throws cache_error when the default compiler's cache directory is refused.
  explicit kernel_cache(std::source_location where = std::source_location::current())
      : kernel_cache(jit::default_compiler(where)) {}
  explicit kernel_cache(jit::compiler& compiler) noexcept : compiler_(&compiler) {}
  kernel_cache(const kernel_cache&) = delete;
  kernel_cache& operator=(const kernel_cache&) = delete;
  //! Unloads the modules of the contexts still alive; those of contexts gone are left (they went with them).
  ~kernel_cache();

  //! The module of `p`, compiled with `o` for `ctx`'s device and loaded into `ctx` (once; later calls hit).
  //! `request == output_request::ptx` forces PTX (loaded through the driver's JIT) even where a CUBIN could be made.
  //! Blocking: compiling takes 10 ms to seconds on a miss.
  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) for an empty context or an LTO-IR request (not loadable as a
  //! module); jit::compile_error; jit::unsupported_architecture_error; jit::ptx_too_new_error when the PTX is newer
  //! than the driver can JIT; cuda_error from loading.
  module_ref module(context_ref ctx, const jit::program& p, const jit::compile_options& o = {},
                    jit::output_request request = jit::output_request::automatic,
                    std::source_location where = std::source_location::current());

  //! Kernel `name` of that module: a name expression of `p` (`"saxpy<float, 256>"`) or an `extern "C"` name.
  //! @throws as `module`, and cuda_error(CUDA_ERROR_NOT_FOUND) for an unknown kernel.
  kernel_ref kernel(context_ref ctx, const jit::program& p, std::string_view name, const jit::compile_options& o = {},
                    jit::output_request request = jit::output_request::automatic,
                    std::source_location where = std::source_location::current()) {
    return module(ctx, p, o, request, where).kernel(name, where);
  }

  //! Kernel `name` of `p` from a context-independent library (`cuasync::library`): compiled once for the device's
  //! target, loaded once for the process (`cuLibraryLoadData`), then used in every context that asks, on any
  //! device of that target (`cuKernelGetFunction` once per context). A second context or device compiles nothing
  //! and loads no module. Blocking on a miss, as `module`.
  //! @throws as `module`, and cuda_error(CUDA_ERROR_NOT_FOUND) for an unknown kernel.
  kernel_ref shared_kernel(context_ref ctx, const jit::program& p, std::string_view name,
                           const jit::compile_options& o = {},
                           jit::output_request request = jit::output_request::automatic,
                           std::source_location where = std::source_location::current());
  //! Kernel `name` of `programs` compiled to LTO-IR and linked by nvJitLink into one CUBIN for `ctx`'s device
  //! (`jit::compiler::link_programs`: a templated kernel and the user fragments it calls), loaded as a
  //! context-independent library as `shared_kernel` does. The compiles and the link go through the compiler's caches.
  //! @throws as `shared_kernel`, and jit::link_error, jit::nvjitlink_not_found_error.
  kernel_ref linked_kernel(context_ref ctx, std::span<const jit::program> programs, std::string_view name,
                           const jit::compile_options& o = {}, const jit::link_options& lo = {},
                           std::source_location where = std::source_location::current());

  //! The process's library for `compiled` (a CUBIN or PTX result of this cache's compiler), loaded on first use
  //! (`cuLibraryLoadData`, outside this cache's lock) and kept by `compiled.key`: what `shared_kernel` and
  //! `linked_kernel` use, so a library loaded here ahead of time (a warm start, `warm_start.hpp`) makes their later
  //! requests library hits. Needs no context.
  //! @throws cuda_error(CUDA_ERROR_INVALID_VALUE) for an LTO-IR result; jit::ptx_too_new_error; cuda_error from
  //! loading.
  const cuasync::library& load_library(const jit::compile_result& compiled,
                                       std::source_location where = std::source_location::current());

  //! The target chosen for `ctx`'s device. @throws as `module`.
  jit::target target_for(context_ref ctx, jit::output_request request = jit::output_request::automatic,
                         std::source_location where = std::source_location::current()) const;

  //! The compiled program behind a module this cache loaded for `ctx` (e.g. to read its lowered names or log).
  //! @throws as `module`.
  std::shared_ptr<const jit::compiled_program> compiled(context_ref ctx, const jit::program& p,
                                                        const jit::compile_options& o = {},
                                                        jit::output_request request = jit::output_request::automatic,
                                                        std::source_location where = std::source_location::current());

  kernel_cache_stats stats() const noexcept;
  jit::compiler& compiler() noexcept { return *compiler_; }

 private:
  struct loaded {
    std::shared_ptr<const jit::compiled_program> program;
    cuasync::module module;
    CUcontext context = nullptr;
  };
  const loaded& load(context_ref ctx, const jit::program& p, const jit::compile_options& o,
                     jit::output_request request, std::source_location where);

  jit::compiler* compiler_;
  // By program (or link) key: loaded once, used in every context.
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::unique_ptr<cuasync::library>> libraries_;
  std::uint64_t library_hits_ = 0, library_loads_ = 0;
  mutable std::mutex mutex_;
  // By context id (cuCtxGetId: never reused) and program key; the id last seen for each context handle.
  std::map<std::pair<unsigned long long, std::pair<std::uint64_t, std::uint64_t>>, std::unique_ptr<loaded>> modules_;
  std::map<CUcontext, unsigned long long> id_of_handle_;
  std::uint64_t module_hits_ = 0, module_loads_ = 0;
};

}  // namespace cuasync::runtime
