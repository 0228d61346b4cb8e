// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: while a completion handler is being called with an error, what `failure_detail()` describes (one per
// thread; nested calls restore the outer one).
#include <cuasync/driver/stream.hpp>

#include <exception>
#include <source_location>
#include <system_error>

namespace cuasync::detail {

struct failure_info {
  std::error_code ec;
  std::exception_ptr described;  // the failed call's own cuda_error, when there was one
  stream_ref stream;             // the stream the operation was on (may be empty)
  std::source_location where;    // the caller's line (line 0: unknown)
};

class failure_scope {
 public:
  failure_scope(std::error_code ec, std::exception_ptr described, stream_ref s, std::source_location where) noexcept;
  ~failure_scope();
  failure_scope(const failure_scope&) = delete;
  failure_scope& operator=(const failure_scope&) = delete;

 private:
  failure_info info_;
  const failure_info* outer_;
};

//! The failure being delivered on this thread, or null.
const failure_info* current_failure() noexcept;

}  // namespace cuasync::detail
