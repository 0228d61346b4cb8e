// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuasync.h compiles as C++ with -pedantic -Werror (this file is only compiled).
#include <cuasync/cuasync.h>

static_assert(CUASYNC_ABI_MAJOR == 1);
static_assert(CUASYNC_COPY_ARGS_SIZE <= sizeof(cuasync_copy_args));

int cuasync_header_cxx_probe() {
  cuasync_copy_args a{};
  a.struct_size = CUASYNC_COPY_ARGS_SIZE;
  return static_cast<int>(a.struct_size);
}
