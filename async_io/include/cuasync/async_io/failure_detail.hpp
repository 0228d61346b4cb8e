// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! `failure_detail()`: the whole story of the failure a completion handler is called with. A handler's
//! signature carries only a `std::error_code`; the description — a `cuda_error` that names the failed driver call
//! (`cuMemcpyAsync`, `cuLaunchKernelEx`, ...), the stream, the device and the caller's line, or for GPU work that
//! faulted the stream it was awaited on and whether the context is lost — is there while the handler runs.
//! `use_awaitable` and `use_future` throw exactly that exception.

#include <exception>

namespace cuasync {

//! Inside a completion handler that cuasync calls with an error (and, for coroutines, until the resumed coroutine
//! next suspends): that failure as an exception (`std::rethrow_exception` it, catch `cuda_error`). Null elsewhere,
//! and for success.
std::exception_ptr failure_detail() noexcept;

}  // namespace cuasync
