// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Compiled into the library, so that version() answers for the library and not for the headers of its caller.
#include <cuasync/version.hpp>

namespace cuasync {

version_info version() noexcept {
  return {CUASYNC_VERSION_MAJOR, CUASYNC_VERSION_MINOR, CUASYNC_VERSION_PATCH, CUASYNC_VERSION_STRING};
}

}  // namespace cuasync
