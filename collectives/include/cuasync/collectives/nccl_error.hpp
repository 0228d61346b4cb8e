// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! NCCL's errors as cuasync errors: `nccl_category()` for `ncclResult_t` values (so they travel through
//! completions as `std::error_code`s like `CUresult`s), and the loader's typed errors, all `cuda_error`s.

#include <cuasync/driver/error.hpp>

#include <source_location>
#include <string>
#include <system_error>

namespace cuasync::collectives {

//! The `std::error_category` of `ncclResult_t` values ("nccl"): messages from the loaded library's
//! `ncclGetErrorString`, or a built-in table when NCCL is not loaded.
const std::error_category& nccl_category() noexcept;

//! A `std::error_code` in `nccl_category()` for an `ncclResult_t` value.
inline std::error_code make_nccl_error_code(int nccl_result) noexcept { return {nccl_result, nccl_category()}; }

//! No NCCL library could be opened: the message lists every path tried and what to do.
class nccl_not_found_error : public cuda_error { using cuda_error::cuda_error; };
//! The library opened lacks an entry point cuasync needs (older than NCCL 2.7, or not NCCL).
class nccl_too_old_error : public cuda_error { using cuda_error::cuda_error; };
//! A collective failed after it was enqueued: NCCL reported an asynchronous error, the GPU faulted, or it ran past the
//! communicator's timeout. The communicator was aborted; `detail()` names the collective, rank and device.
class collective_error : public cuda_error { using cuda_error::cuda_error; };

namespace detail {
//! Throws `cuda_error` with the NCCL result `r` (`nccl_category()`), naming `api` and what it concerned; the text of
//! `ncclGetLastError` is appended when the library has it.
[[noreturn]] void throw_nccl(int r, const char* api, std::string what, std::source_location where);
inline void check_nccl(int r, const char* api, std::string_view what, std::source_location where) {
  if (r != 0) [[unlikely]] throw_nccl(r, api, std::string(what), where);
}
}  // namespace detail

}  // namespace cuasync::collectives
