// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: what every C ABI call shares — version-tolerant argument structs, error objects, and the translation of
// C++ exceptions into them (no exception crosses the boundary).
#include "shipped_sizes.hpp"

#include <cuasync/cuasync.h>

#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

struct cuasync_error {
  cuasync_error_code code = CUASYNC_ERROR_INTERNAL;
  int cuda_result = 0;
  int nvrtc_result = 0;
  std::string message;
};

namespace cuasync::c_api {

//! An error raised inside the C ABI (a bad argument, a stale handle, an unknown field), before any C++ layer.
struct abi_error {
  cuasync_error_code code;
  std::string message;
};
[[noreturn]] inline void fail(cuasync_error_code code, std::string message) { throw abi_error{code, std::move(message)}; }

//! A new error object (never throws; out of memory gives a static one).
cuasync_error* make_error(cuasync_error_code code, std::string message, int cuda_result = 0, int nvrtc_result = 0) noexcept;
//! The static error of cuasync_get_api(major, NULL) (the caller has no table to free an error with).
cuasync_error* no_table_error() noexcept;
//! The error for the exception being handled (call inside a catch block), for the call named `call`.
cuasync_error* current_error(const char* call) noexcept;

//! The caller's arguments read with its struct_size: a smaller (older) struct reads its missing fields as zero; a
//! larger (newer) one is accepted when the fields this library does not know are zero. Outputs are written back
//! only as far as the caller's struct reaches.
template <class T>
class args {
 public:
  args(T* caller, const char* call) : caller_(caller) {
    static_assert(std::is_trivially_copyable_v<T>);
    if (!caller) fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(call) + ": null arguments");
    std::memcpy(&size_, caller, sizeof size_);
    static_assert(shipped_size_1_0<T> != 0, "every args struct has its 1.0 size in shipped_sizes.hpp");
    if (size_ < shipped_size_1_0<T>)
      fail(CUASYNC_ERROR_INVALID_ARGUMENT, std::string(call) + ": struct_size " + std::to_string(size_) +
                                               " is smaller than any version of its arguments struct (1.0: " +
                                               std::to_string(shipped_size_1_0<T>) + ")");
    if (size_ > sizeof(T)) {
      const auto* tail = reinterpret_cast<const unsigned char*>(caller) + sizeof(T);
      for (std::size_t i = 0; i < size_ - sizeof(T); ++i)
        if (tail[i])
          fail(CUASYNC_ERROR_UNSUPPORTED, std::string(call) + ": the caller set fields this library (ABI " +
                                              std::to_string(CUASYNC_ABI_MAJOR) + "." +
                                              std::to_string(CUASYNC_ABI_MINOR) + ") does not know (byte " +
                                              std::to_string(sizeof(T) + i) + " of " + std::to_string(size_) + ")");
    }
    std::memset(&local_, 0, sizeof local_);
    std::memcpy(&local_, caller, size_ < sizeof(T) ? size_ : sizeof(T));
  }
  T* operator->() noexcept { return &local_; }
  T& operator*() noexcept { return local_; }
  //! True when the caller's struct reaches `field_end` bytes (the end of a field added later).
  bool has(std::size_t field_end) const noexcept { return size_ >= field_end; }
  void write_back() noexcept {
    local_.struct_size = size_;
    std::memcpy(caller_, &local_, size_ < sizeof(T) ? size_ : sizeof(T));
  }

 private:
  T* caller_;
  std::size_t size_ = 0;
  T local_;
};

//! Runs `body(args)` for a call: reads the arguments, translates every exception, writes the outputs back.
template <class T, class Body>
cuasync_error* call(const char* name, T* caller, Body&& body) noexcept {
  try {
    args<T> a(caller, name);
    body(a);
    a.write_back();
    return nullptr;
  } catch (...) {
    return current_error(name);
  }
}

}  // namespace cuasync::c_api
