// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// How jit/ finds the CUDA libraries it loads at run time (NVRTC, nvJitLink): the file a variable names, else the
// names as the dynamic loader finds them, then the same names in each folder of $CUASYNC_NVRTC_SEARCH_PATH (the
// Python package puts pip's site-packages/nvidia/*/lib folders there; one wheel folder holds both libraries).
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::jit::detail {

//! The outcome of `open_first`.
struct opened_library {
  void* handle = nullptr;            //!< dlopen's handle, nullptr when nothing opened
  std::string path;                  //!< the candidate that opened
  std::optional<std::string> env;    //!< the variable's value, when it chose the file
  std::string tried;                 //!< "\n  candidate: dlerror" for every candidate that failed
};

//! Opens `$env_var` when set and not empty (only that), else each of `names` by name, then each name in each folder
//! of `$CUASYNC_NVRTC_SEARCH_PATH`, with `RTLD_NOW | RTLD_LOCAL`; the first that opens wins.
opened_library open_first(const char* env_var, const std::vector<std::string>& names);

//! Runs `open()` (which returns a new `Library*` or throws) once per process; every call returns its library or
//! throws its failure again. The thread that ran it calls `log(library_or_null, failure)` after the once is over, so
//! that a log sink may call into cuasync.
template <class Library, class Open, class Log>
const Library& load_library_once(std::once_flag& once, Library*& slot, std::exception_ptr& failure, Open&& open, Log&& log) {
  bool loaded_here = false;
  std::call_once(once, [&] {
    loaded_here = true;
    try {
      slot = open();
    } catch (...) {
      failure = std::current_exception();
    }
  });
  if (loaded_here) [[unlikely]]
    log(static_cast<const Library*>(slot), failure);
  if (slot) return *slot;
  std::rethrow_exception(failure);
}

}  // namespace cuasync::jit::detail
