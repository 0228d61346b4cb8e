// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
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
/* What error_info says of `e` (code, results, message), without freeing it. */
cuasync_error_info_args info_of(cuasync_error* e);
/* Prints the error (what failed, its code and message) without freeing it. */
void print_error(const char* what, cuasync_error* e);
/* True when `e` is NULL; otherwise prints it as a failure of `what`, frees it and counts a failure. */
int ok(cuasync_error* e, const char* what);

/* Records from the fd until `want` arrived (or 30 s); returns how many. */
int drain_until(cuasync_queue q, int fd, cuasync_completion_record* out, int want);

/* Launch arguments for kernel `k` on `s` with `n` arguments (borrowed): the current struct_size, one block of one
 * thread (grid and block 0), tracked with no completion (set flags and completion as the check needs). */
cuasync_launch_args launch_args_of(cuasync_stream s, cuasync_kernel k, const cuasync_kernel_arg* args, size_t n);

/* A runtime on device 0, a stream it creates and a queue with an fd: what the parts on a driver start with. */
typedef struct fixture {
  cuasync_runtime runtime;
  cuasync_stream stream;
  cuasync_queue queue;
  int fd;
} fixture;
/* 0 when one of them could not be made (reported, and counted as a failure). */
int open_fixture(fixture* f);
void close_fixture(fixture* f);

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
/* ABI 1.2 (conformance_abi_1_2.c): the version, the log sink and compile_image, with or without a driver; and the
 * admission bounds of a runtime, on a driver. */
void run_abi_1_2_part(void);
void run_admission_part(void);
/* ABI 1.3 (conformance_abi_1_3.c): the flight recorder; `with_driver`: also a stream's operations in its dump. */
void run_abi_1_3_part(int with_driver);
/* ABI 1.4 (conformance_abi_1_4.c): typed launch arguments; `with_driver`: compiles and launches too (the simulated
 * driver needs FAKE_CUDA_COMPUTE_CAPABILITY=95, so that NVRTC makes PTX). */
void run_abi_1_4_part(int with_driver);
/* ABI 1.5 (conformance_abi_1_5.c): compile_image_start / _finish, with or without a driver. */
void run_abi_1_5_part(void);
/* On the simulated driver only: admission places of operations without a completion (conformance_batches.c). */
void run_batches_part(void);
/* Capture-transparent operations inside the caller's cuStreamBeginCapture (conformance_capture.c), on a driver;
 * `gpu`: 10,000 graph launches by default (CUASYNC_CAPTURE_REPLAYS), else 100. */
void run_capture_part(int gpu);
/* The driver's capture and graph entry points (from the libcuda cuasync loaded: CUASYNC_LIBCUDA, else libcuda.so.1),
 * for the parts that capture and launch graphs themselves, as a framework does (conformance_capture.c). */
#include <cuda.h>
typedef struct capture_driver {
  CUresult (*begin)(CUstream, CUstreamCaptureMode);
  CUresult (*end)(CUstream, CUgraph*);
  CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*launch)(CUgraphExec, CUstream);
  CUresult (*exec_destroy)(CUgraphExec);
  CUresult (*destroy)(CUgraph);
  CUresult (*synchronize)(CUstream);
  CUresult (*stream_ctx)(CUstream, CUcontext*);  /* a graph is instantiated in the current context */
  CUresult (*set_current)(CUcontext);
} capture_driver;
/* 1 when every entry point was found. */
int load_capture_driver(capture_driver* d);
/* sim_add_u32(unsigned* p, unsigned n, unsigned v): p[i] += v, compiled in `f`'s runtime (the simulated driver runs
 * it by name); NULL when it could not be made (reported). */
cuasync_kernel add_u32_kernel(fixture* f);
/* A buffer of `kind` and `n` bytes on `f`'s stream: its pointer, NULL when it could not be made (reported). */
void* allocate_buffer(fixture* f, cuasync_memory_kind kind, size_t n, cuasync_buffer* b);
/* ABI 1.6 (conformance_abi_1_6.c): replay anchors in the caller's capture, awaited once per replay of its graph, on a
 * driver; `gpu`: 10,000 replays (CUASYNC_CAPTURE_REPLAYS), else 100. */
void run_abi_1_6_part(int gpu);
/* ABI 1.7 (conformance_abi_1_7.c): queue_poll, without a driver (host tokens) and, `with_driver`, a memset's
 * completions taken by polling alone. */
void run_abi_1_7_part(int with_driver);
/* The GPU part (conformance_gpu.c); returns nothing, counts through CHECK. */
void run_gpu_part(void);

#endif
