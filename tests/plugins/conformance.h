/* Shared by the conformance suite's parts: the check macro and its counters, and reading errors through the table. */
#ifndef CUASYNC_CONFORMANCE_H
#define CUASYNC_CONFORMANCE_H

#include <cuasync/cuasync.h>

#include <stdint.h>
#include <stdio.h>

extern int checks, failures;
extern const cuasync_api* api;

#define CHECK(cond)                                                     \
  do {                                                                  \
    ++checks;                                                           \
    if (!(cond)) {                                                      \
      ++failures;                                                       \
      fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                   \
  } while (0)

/* The error's code, after checking that it carries a message; frees it. CUASYNC_OK for NULL. */
cuasync_error_code code_of(cuasync_error* e);
/* True when the error's message contains `needle` (prints it otherwise); does not free it. */
int message_has(cuasync_error* e, const char* needle);
/* Prints the error (what failed, its code and message) without freeing it. */
void print_error(const char* what, cuasync_error* e);
/* True when `e` is NULL; otherwise prints it as a failure of `what`, frees it and counts a failure. */
int ok(cuasync_error* e, const char* what);

/* Records from the fd until `want` arrived (or 30 s); returns how many. */
int drain_until(cuasync_queue q, int fd, cuasync_completion_record* out, int want);

/* The layout of DLPack 1.x's DLManagedTensorVersioned, flattened (declared here, as cuasync does). */
typedef struct dl_managed {
  uint32_t version_major, version_minor;
  void* manager_ctx;
  void (*deleter)(struct dl_managed*);
  uint64_t flags;
  void* data;
  int32_t device_type, device_id;
  int32_t ndim;
  uint8_t dtype_code, dtype_bits;
  uint16_t dtype_lanes;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} dl_managed;

/* The part on any driver (conformance_host_work.c: the simulated libcuda in CI, the GPU's with --gpu): copies,
 * memsets, buffers and tokens, no kernel. */
void run_host_work_part(void);
/* The GPU part (conformance_gpu.c); returns nothing, counts through CHECK. */
void run_gpu_part(void);

#endif
