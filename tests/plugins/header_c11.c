// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* cuasync.h compiles as C11 with -pedantic -Werror (this file is only compiled). */
#include <cuasync/cuasync.h>

_Static_assert(CUASYNC_ABI_MAJOR == 1, "ABI 1");
_Static_assert(CUASYNC_API_SIZE_1_7 == sizeof(cuasync_api), "the table ends with 1.7's last function");
_Static_assert(CUASYNC_API_SIZE_1_4 == CUASYNC_API_SIZE_1_3, "1.4 added no function");
/* The type codes are constant expressions (usable in static tables of a binding). */
_Static_assert(CUASYNC_ARG_F32 == 0x01000404u && CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F32) == 0x01010404u,
               "float and float*");

int cuasync_header_c11_probe(void);
int cuasync_header_c11_probe(void) {
  cuasync_copy_args a = {CUASYNC_COPY_ARGS_SIZE, 0, 0, 0, 0, {0, 0, 0, 0}};
  return (int)a.struct_size;
}
