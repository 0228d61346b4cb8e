// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/collectives/detail/nccl_api.hpp>
#include <cuasync/collectives/nccl_error.hpp>

namespace cuasync::collectives {

namespace {

// NCCL's own texts (nccl.h 2.28), for when no library is loaded.
const char* builtin_message(int r) noexcept {
  switch (r) {
    case detail::nccl_success: return "no error";
    case detail::nccl_unhandled_cuda_error: return "unhandled cuda error (a CUDA call inside NCCL failed)";
    case detail::nccl_system_error: return "unhandled system error (network, shared memory, ...)";
    case detail::nccl_internal_error: return "internal error (a bug in NCCL, or memory corruption)";
    case detail::nccl_invalid_argument: return "invalid argument";
    case detail::nccl_invalid_usage: return "invalid usage";
    case detail::nccl_remote_error: return "remote process exited or there was a network error";
    case detail::nccl_in_progress: return "NCCL operation in progress";
    default: return "unknown NCCL result";
  }
}

class nccl_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "nccl"; }
  std::string message(int r) const override {
    // The loaded library's own text (its version's wording); never loads it here.
    if (const detail::nccl_entry_points* n = detail::nccl_if_loaded())
      if (const char* text = n->get_error_string(static_cast<detail::nccl_result>(r)); text && *text) return text;
    return builtin_message(r);
  }
};

}  // namespace

const std::error_category& nccl_category() noexcept {
  static const nccl_category_impl c;
  return c;
}

namespace detail {

void throw_nccl(int r, const char* api, std::string what, std::source_location where) {
  // The last error's text says which CUDA call or which peer failed; only the loaded library knows it.
  try {
    const nccl_entry_points& n = nccl();
    if (n.get_last_error)
      if (const char* last = n.get_last_error(nullptr); last && *last) what += (what.empty() ? "" : "; ") + std::string(last);
  } catch (...) {
  }
  throw cuda_error(make_nccl_error_code(r), api, std::move(what), where);
}

}  // namespace detail
}  // namespace cuasync::collectives
