// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The non-template part of async_collectives.hpp (no Asio here: the header instantiates the initiation).
#include <cuasync/collectives/collective_ops.hpp>
#include <cuasync/driver/error.hpp>

namespace cuasync::collectives::detail {

void refuse_inside_group(const char* api, std::source_location where) {
  if (group::depth() > 0)
    cuasync::detail::throw_invalid(api,
                                   "called inside an open group, whose collectives are issued only when it ends: end "
                                   "the group, then co_await async_wait_collective(comm, stream) for each rank",
                                   where);
}

}  // namespace cuasync::collectives::detail
