/* cuasync.h compiles as C11 with -pedantic -Werror (this file is only compiled). */
#include <cuasync/cuasync.h>

_Static_assert(CUASYNC_ABI_MAJOR == 1, "ABI 1");

int cuasync_header_c11_probe(void);
int cuasync_header_c11_probe(void) {
  cuasync_copy_args a = {CUASYNC_COPY_ARGS_SIZE, 0, 0, 0, 0, {0, 0, 0, 0}};
  return (int)a.struct_size;
}
