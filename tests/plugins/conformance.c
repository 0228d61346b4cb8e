// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The C ABI's conformance suite, in C11, as a framework would use the library: it only dlopen()s libcuasync.so.
 * Usage: cuasync_conformance PATH/libcuasync.so [--simulated | --gpu | --no-driver]
 *        (CUASYNC_NO_FAULT=1: without the final fault; --no-driver: only what a machine without a driver sees, run with
 *        CUASYNC_LIBCUDA naming no library)
 * Without --gpu (CI): version negotiation, struct_size in both directions, NULL and stale handles, error messages,
 * the 1.1 fields checked before any handle (1.0-sized structs still accepted), a clear error without a driver, and the
 * completion queue's fd protocol under stress (host tokens, several threads); ABI 1.2's version, log sink and
 * compile_image (NVRTC, no driver).
 * With --simulated (CI, CUASYNC_LIBCUDA naming the simulated driver) or --gpu: copies, waits and the sizes refused
 * (conformance_host_work.c).
 * With --gpu (the GPU machine): also a framework's own stream (made with raw driver calls) adopted, a kernel compiled
 * from source, pageable and pinned copies, launches, completions by callback and by fd, and a fault reaching every
 * pending completion. Prints one line per check that fails, and a summary; exits non-zero on any failure. */
#define _GNU_SOURCE
#include "conformance.h"

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int checks = 0, failures = 0;
const cuasync_api* api;

cuasync_error_code code_of(cuasync_error* e) {
  if (!e) return CUASYNC_OK;
  cuasync_error_info_args info;
  memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = e;
  api->error_info(&info);
  CHECK(info.message != NULL && info.message_size > 0 && strlen(info.message) == info.message_size);
  const cuasync_error_code code = info.code;
  api->error_destroy(e);
  return code;
}

int message_has(cuasync_error* e, const char* needle) {
  if (!e) return 0;
  cuasync_error_info_args info;
  memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = e;
  api->error_info(&info);
  if (strstr(info.message, needle)) return 1;
  fprintf(stderr, "the message lacks '%s': %s\n", needle, info.message);
  return 0;
}

cuasync_error_info_args info_of(cuasync_error* e) {
  cuasync_error_info_args info;
  memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = e;
  api->error_info(&info);
  return info;
}

void print_error(const char* what, cuasync_error* e) {
  cuasync_error_info_args info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  info.error = e;
  api->error_info(&info);
  fprintf(stderr, "%s: code %d, cuda %d: %s\n", what, (int)info.code, info.cuda_result, info.message);
}

int ok(cuasync_error* e, const char* what) {
  if (!e) return 1;
  print_error(what, e);
  api->error_destroy(e);
  ++failures;
  return 0;
}

/* ---- versions and arguments ------------------------------------------------------------------------------------- */

static void test_versions(cuasync_get_api_fn get_api) {
  const cuasync_api* other = NULL;
  cuasync_error* e = get_api(CUASYNC_ABI_MAJOR + 1, &other);
  CHECK(e != NULL);
  CHECK(other != NULL); /* the library's own table, to read and free the error with */
  if (other) {
    api = other;
    CHECK(code_of(e) == CUASYNC_ERROR_UNSUPPORTED);
  }
  e = get_api(CUASYNC_ABI_MAJOR, NULL);
  CHECK(e != NULL);
  /* Static (the caller has no table to free it with): the same each time, and freeing it is harmless. */
  CHECK(e == get_api(CUASYNC_ABI_MAJOR, NULL));
  if (e && api) CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(get_api(CUASYNC_ABI_MAJOR, &api) == NULL);
  CHECK(api != NULL);
  if (!api) return;
  CHECK(api->abi_major == CUASYNC_ABI_MAJOR);
  CHECK(api->struct_size >= CUASYNC_API_SIZE_1_0);
  api->error_destroy(NULL); /* accepted */
}

/* A queue_drain_args as a later minor version might ship it: one more field at the end. */
typedef struct drain_args_next {
  cuasync_queue_drain_args base;
  uint64_t future_field;
} drain_args_next;

static void test_struct_sizes(void) {
  cuasync_queue_create_args qc;
  memset(&qc, 0, sizeof qc);
  qc.struct_size = CUASYNC_QUEUE_CREATE_ARGS_SIZE;
  qc.flags = CUASYNC_QUEUE_FD;
  CHECK(api->queue_create(&qc) == NULL);
  cuasync_completion_record records[4];

  /* Newer caller, zeroed tail: accepted. */
  drain_args_next next;
  memset(&next, 0, sizeof next);
  next.base.struct_size = sizeof next;
  next.base.queue = qc.queue;
  next.base.records = records;
  next.base.capacity = 4;
  next.base.count = 99;
  CHECK(api->queue_drain(&next.base) == NULL);
  CHECK(next.base.count == 0);
  /* Newer caller asking for something this library does not know: refused, with a message. */
  next.future_field = 1;
  CHECK(code_of(api->queue_drain(&next.base)) == CUASYNC_ERROR_UNSUPPORTED);

  /* Older caller: error_info without the message fields still gets the code; nothing past its size is written. */
  cuasync_queue_fd_args bad;
  memset(&bad, 0, sizeof bad);
  bad.struct_size = CUASYNC_QUEUE_FD_ARGS_SIZE;
  cuasync_error* e = api->queue_fd(&bad); /* NULL queue */
  CHECK(e != NULL);
  struct {
    cuasync_error_info_args info;
    uint64_t guard;
  } old;
  memset(&old, 0xab, sizeof old);
  old.info.struct_size = CUASYNC_STRUCT_SIZE(cuasync_error_info_args, nvrtc_result);
  old.info.error = e;
  api->error_info(&old.info);
  CHECK(old.info.code == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(*(const unsigned char*)&old.info.message == 0xab); /* beyond the caller's struct_size: untouched */
  api->error_destroy(e);

  /* A struct_size too small to be one. */
  qc.struct_size = 3;
  CHECK(code_of(api->queue_create(&qc)) == CUASYNC_ERROR_INVALID_ARGUMENT);

  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, next.base.queue};
  CHECK(api->queue_destroy(&qd) == NULL);
}

static void test_null_and_stale(void) {
  CHECK(code_of(api->queue_create(NULL)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(code_of(api->device_count(NULL)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  CHECK(api->queue_create(&qc) == NULL);
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  /* Looked up just before its destroy (the thread's last lookup of a queue, which the library answers again without
   * its lock while no handle is destroyed): stale after it all the same. */
  cuasync_queue_fd_args fd = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(api->queue_fd(&fd) == NULL);
  CHECK(api->queue_fd(&fd) == NULL);
  CHECK(api->queue_destroy(&qd) == NULL);
  /* Destroyed: stale, twice. */
  CHECK(code_of(api->queue_destroy(&qd)) == CUASYNC_ERROR_STALE_HANDLE);
  CHECK(code_of(api->queue_fd(&fd)) == CUASYNC_ERROR_STALE_HANDLE);
  /* NULL, made up, or of another kind. */
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, NULL};
  cuasync_error* e = api->stream_destroy(&sd);
  CHECK(message_has(e, "stream_destroy: stream is NULL")); /* every message names its call */
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  sd.stream = (cuasync_stream)(uintptr_t)0x12345602;
  CHECK(code_of(api->stream_destroy(&sd)) == CUASYNC_ERROR_STALE_HANDLE);
  CHECK(api->queue_create(&qc) == NULL);
  sd.stream = (cuasync_stream)qc.queue;
  CHECK(code_of(api->stream_destroy(&sd)) == CUASYNC_ERROR_STALE_HANDLE);
  /* A handle of another kind as a completion's queue. */
  cuasync_host_token_create_args wrong;
  memset(&wrong, 0, sizeof wrong);
  wrong.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
  wrong.completion.queue = (cuasync_queue)(uintptr_t)0x12345602;
  e = api->host_token_create(&wrong);
  CHECK(message_has(e, "host_token_create: the completion's queue is not a queue handle"));
  CHECK(code_of(e) == CUASYNC_ERROR_STALE_HANDLE);
  cuasync_launch_args la;
  memset(&la, 0, sizeof la);
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  /* A callback on a queue without a callback thread; flags that make no queue. */
  cuasync_host_token_create_args hc;
  memset(&hc, 0, sizeof hc);
  hc.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
  hc.completion.queue = qc.queue;
  hc.completion.callback = (cuasync_callback)print_error;
  CHECK(code_of(api->host_token_create(&hc)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  cuasync_queue_create_args none = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, 0, NULL};
  CHECK(code_of(api->queue_create(&none)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  qd.queue = qc.queue;
  CHECK(api->queue_destroy(&qd) == NULL);
}

/* ABI 1.1: the three structs that grew (launch, kernel_get, buffer_import_dlpack) are still accepted at their 1.0 size,
 * reaching the handle check (a made-up handle: STALE_HANDLE), with whatever lies past that size unread; the new fields
 * are checked before any handle is looked at. */
static void test_abi_1_1(void) {
  CHECK(api->abi_minor >= 1);
  void* made_up = (void*)(uintptr_t)0x7a7a7a02;
  cuasync_launch_args la;
  memset(&la, 0, sizeof la);
  la.struct_size = CUASYNC_STRUCT_SIZE(cuasync_launch_args, completion); /* 1.0 */
  la.stream = (cuasync_stream)made_up;
  la.kernel = (cuasync_kernel)made_up;
  la.flags = 0xff; /* past the caller's struct: not read */
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_STALE_HANDLE);
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  la.flags = 4; /* unknown bits: refused as such, before the handles */
  cuasync_error* e = api->launch(&la);
  CHECK(message_has(e, "flags"));
  CHECK(code_of(e) == CUASYNC_ERROR_UNSUPPORTED);
  la.flags = CUASYNC_LAUNCH_UNTRACKED | 0x80000000u;
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_UNSUPPORTED);
  la.flags = CUASYNC_LAUNCH_UNTRACKED; /* known, no completion: on to the handles */
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_STALE_HANDLE);
  la.flags = CUASYNC_LAUNCH_DEPENDENT | CUASYNC_LAUNCH_UNTRACKED; /* ABI 1.2's bit is known too */
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_STALE_HANDLE);
  la.completion.queue = (cuasync_queue)made_up; /* untracked with a completion: the conflict, before the handles */
  e = api->launch(&la);
  CHECK(message_has(e, "CUASYNC_LAUNCH_UNTRACKED"));
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  la.completion.queue = NULL;
  la.completion.callback = (cuasync_callback)print_error;
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_INVALID_ARGUMENT);

  size_t sizes[4] = {0, 0, 0, 0};
  cuasync_kernel_get_args kg;
  memset(&kg, 0, sizeof kg);
  kg.struct_size = CUASYNC_STRUCT_SIZE(cuasync_kernel_get_args, num_params); /* 1.0 */
  kg.module = (cuasync_module)made_up;
  kg.name = "k";
  kg.param_sizes_capacity = 4; /* past the caller's struct: not read */
  CHECK(code_of(api->kernel_get(&kg)) == CUASYNC_ERROR_STALE_HANDLE);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  e = api->kernel_get(&kg); /* a capacity without its array */
  CHECK(message_has(e, "param_sizes"));
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  kg.param_sizes = sizes;
  CHECK(code_of(api->kernel_get(&kg)) == CUASYNC_ERROR_STALE_HANDLE);
  kg.param_sizes = NULL;
  kg.param_sizes_capacity = 0; /* none asked for */
  CHECK(code_of(api->kernel_get(&kg)) == CUASYNC_ERROR_STALE_HANDLE);

  cuasync_buffer_import_dlpack_args im;
  memset(&im, 0, sizeof im);
  im.struct_size = CUASYNC_STRUCT_SIZE(cuasync_buffer_import_dlpack_args, size); /* 1.0 */
  im.runtime = (cuasync_runtime)made_up;
  im.stream = (cuasync_stream)made_up;
  im.released.queue = (cuasync_queue)made_up; /* past the caller's struct: not read */
  CHECK(code_of(api->buffer_import_dlpack(&im)) == CUASYNC_ERROR_STALE_HANDLE);
  im.struct_size = CUASYNC_BUFFER_IMPORT_DLPACK_ARGS_SIZE;
  CHECK(code_of(api->buffer_import_dlpack(&im)) == CUASYNC_ERROR_STALE_HANDLE);

  /* A default stream is adopted in a runtime's context: without a runtime it is refused, before any driver call. */
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.native = (void*)(uintptr_t)1; /* CU_STREAM_LEGACY */
  e = api->stream_create(&sc);
  CHECK(message_has(e, "default stream"));
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
}

/* A malformed kernel package is reported with its file and line, before anything needs a GPU. */
static void test_package_errors(void) {
  char dir[] = "/tmp/cuasync-conformance-XXXXXX";
  if (!mkdtemp(dir)) {
    CHECK(0);
    return;
  }
  char path[256];
  snprintf(path, sizeof path, "%s/cuasync.manifest", dir);
  FILE* f = fopen(path, "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs("package broken\n# a comment\nsourse kernels.cu\n", f);
  fclose(f);
  cuasync_package_load_args pl;
  memset(&pl, 0, sizeof pl);
  pl.struct_size = CUASYNC_PACKAGE_LOAD_ARGS_SIZE;
  pl.directory = dir;
  cuasync_error* e = api->package_load(&pl);
  CHECK(e != NULL);
  if (e) {
    const cuasync_error_info_args info = info_of(e);
    CHECK(info.code == CUASYNC_ERROR_INVALID_ARGUMENT);
    CHECK(strstr(info.message, "cuasync.manifest:3: unknown entry 'sourse'") != NULL);
    api->error_destroy(e);
  }
  remove(path);
  rmdir(dir);
}

/* Without a driver: the error names the call, the cause and the fix, and not cuasync's own source line (but with
 * CUASYNC_DEBUG=1, read at each error). */
static void test_no_driver_message(cuasync_runtime_create_args* rc) {
  const char* debug = getenv("CUASYNC_DEBUG");
  char* saved = debug ? strdup(debug) : NULL;
  unsetenv("CUASYNC_DEBUG");
  cuasync_error* e = api->runtime_create(rc);
  CHECK(message_has(e, "runtime_create: ") && message_has(e, "CUASYNC_LIBCUDA"));
  const cuasync_error_info_args info = info_of(e);
  CHECK(e && strstr(info.message, ".cpp:") == NULL && strstr(info.message, "cuasync::") == NULL);
  CHECK(code_of(e) == CUASYNC_ERROR_NO_DRIVER);
  setenv("CUASYNC_DEBUG", "1", 1);
  e = api->runtime_create(rc);
  CHECK(message_has(e, "runtime_create: ") && message_has(e, ".cpp:"));
  CHECK(code_of(e) == CUASYNC_ERROR_NO_DRIVER);
  if (saved) {
    setenv("CUASYNC_DEBUG", saved, 1);
    free(saved);
  } else {
    unsetenv("CUASYNC_DEBUG");
  }
}

static int test_no_driver(void) {
  cuasync_device_count_args dc = {CUASYNC_DEVICE_COUNT_ARGS_SIZE, -1};
  cuasync_error* e = api->device_count(&dc);
  if (e) {
    print_error("device_count (expected without a GPU)", e);
    CHECK(code_of(e) == CUASYNC_ERROR_NO_DRIVER);
    cuasync_runtime_create_args rc;
    memset(&rc, 0, sizeof rc);
    rc.struct_size = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
    CHECK(code_of(api->runtime_create(&rc)) == CUASYNC_ERROR_NO_DRIVER);
    test_no_driver_message(&rc);
    return 0;
  }
  CHECK(dc.count >= 1);
  return dc.count;
}

cuasync_launch_args launch_args_of(cuasync_stream s, cuasync_kernel k, const cuasync_kernel_arg* args, size_t n) {
  cuasync_launch_args la;
  memset(&la, 0, sizeof la);
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  la.stream = s;
  la.kernel = k;
  la.args = args;
  la.num_args = n;
  return la;
}

int open_fixture(fixture* f) {
  memset(f, 0, sizeof *f);
  cuasync_runtime_create_args rc;
  memset(&rc, 0, sizeof rc);
  rc.struct_size = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
  if (!ok(api->runtime_create(&rc), "runtime_create")) return 0;
  f->runtime = rc.runtime;
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rc.runtime;
  if (!ok(api->stream_create(&sc), "stream_create")) return 0;
  f->stream = sc.stream;
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  if (!ok(api->queue_create(&qc), "queue_create")) return 0;
  f->queue = qc.queue;
  cuasync_queue_fd_args qf = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(ok(api->queue_fd(&qf), "queue_fd"));
  f->fd = qf.fd;
  return 1;
}

void close_fixture(fixture* f) {
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, f->stream};
  CHECK(ok(api->stream_destroy(&sd), "stream_destroy"));
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, f->queue};
  CHECK(ok(api->queue_destroy(&qd), "queue_destroy"));
  cuasync_runtime_destroy_args rd = {CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, f->runtime};
  CHECK(ok(api->runtime_destroy(&rd), "runtime_destroy"));
}

/* Records from the fd until `want` arrived (or 30 s). */
int drain_until(cuasync_queue q, int fd, cuasync_completion_record* out, int want) {
  int got = 0;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (got < want) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > 30) break;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, q, out + got, (size_t)(want - got), 0};
    if (!ok(api->queue_drain(&d), "queue_drain")) break;
    got += (int)d.count;
  }
  return got;
}

/* ---- the fd protocol under stress --------------------------------------------------------------------------------- */

enum { producers = 4, per_producer = 25000, total = producers * per_producer };
static cuasync_queue stress_queue;
static _Atomic unsigned char seen[total];
static atomic_int duplicates, out_of_range, errors_seen, produced;

static void* produce(void* arg) {
  const int base = (int)(intptr_t)arg * per_producer;
  for (int i = 0; i < per_producer; ++i) {
    cuasync_host_token_create_args c;
    memset(&c, 0, sizeof c);
    c.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
    c.completion.queue = stress_queue;
    c.completion.token = (uint64_t)(base + i);
    if (api->host_token_create(&c)) {
      atomic_fetch_add(&errors_seen, 1);
      continue;
    }
    cuasync_host_token_complete_args done = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, c.token, CUASYNC_OK};
    if (api->host_token_complete(&done)) atomic_fetch_add(&errors_seen, 1);
    atomic_fetch_add(&produced, 1);
  }
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* `capacity`: records asked for per drain; 1 makes most drains return as many as asked for, which leaves clearing the
 * fd to the protocol's next drain. */
static void test_fd_stress(size_t capacity) {
  for (int i = 0; i < total; ++i) atomic_store(&seen[i], 0);
  atomic_store(&duplicates, 0);
  atomic_store(&out_of_range, 0);
  atomic_store(&errors_seen, 0);
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  CHECK(api->queue_create(&qc) == NULL);
  stress_queue = qc.queue;
  cuasync_queue_fd_args fa = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(api->queue_fd(&fa) == NULL);
  pthread_t threads[producers];
  for (int t = 0; t < producers; ++t) pthread_create(&threads[t], NULL, produce, (void*)(intptr_t)t);
  /* The consumer: wait for the fd, drain until a drain returns fewer than asked, repeat. Any lost wake-up shows as
   * a timeout with records still undelivered. */
  int received = 0;
  cuasync_completion_record buf[256];
  const double deadline = now_s() + 60;
  while (received < total && now_s() < deadline) {
    struct pollfd p = {fa.fd, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;
    for (;;) {
      cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, qc.queue, buf, capacity, 0};
      if (api->queue_drain(&d)) {
        atomic_fetch_add(&errors_seen, 1);
        break;
      }
      for (size_t i = 0; i < d.count; ++i) {
        if (buf[i].token >= (uint64_t)total || buf[i].code != CUASYNC_OK) {
          atomic_fetch_add(&out_of_range, 1);
          continue;
        }
        if (atomic_exchange(&seen[buf[i].token], 1)) atomic_fetch_add(&duplicates, 1);
        ++received;
      }
      if (d.count < capacity) break;
    }
  }
  for (int t = 0; t < producers; ++t) pthread_join(threads[t], NULL);
  /* Nothing more may come, and the fd must read as empty now. */
  struct pollfd p = {fa.fd, POLLIN, 0};
  CHECK(poll(&p, 1, 50) == 0);
  printf("fd stress (%zu a drain): %d of %d completions received from %d threads; duplicates %d, errors %d\n",
         capacity, received, total, producers, atomic_load(&duplicates), atomic_load(&errors_seen));
  CHECK(received == total);
  CHECK(atomic_load(&duplicates) == 0);
  CHECK(atomic_load(&out_of_range) == 0);
  CHECK(atomic_load(&errors_seen) == 0);
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  CHECK(api->queue_destroy(&qd) == NULL);
}

/* A queue drained by polling, its fd asked for only later: records arrive without it, and the fd, once handed out,
 * is readable for what is queued (before or after it was asked for). */
static void complete_token(cuasync_queue q, uint64_t token) {
  cuasync_host_token_create_args c;
  memset(&c, 0, sizeof c);
  c.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
  c.completion.queue = q;
  c.completion.token = token;
  CHECK(api->host_token_create(&c) == NULL);
  cuasync_host_token_complete_args done = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, c.token, CUASYNC_OK};
  CHECK(api->host_token_complete(&done) == NULL);
}

static void test_fd_asked_late(void) {
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  CHECK(api->queue_create(&qc) == NULL);
  enum { n = 1000 };
  int received = 0, wrong = 0;
  const double deadline = now_s() + 30;
  for (int i = 0; i < n; ++i) {
    complete_token(qc.queue, (uint64_t)i);
    cuasync_completion_record r;
    for (;;) {
      cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, qc.queue, &r, 1, 0};
      cuasync_error* e = api->queue_drain(&d);
      if (e) {
        api->error_destroy(e);
        ++wrong;
        break;
      }
      if (d.count == 1) {
        if (r.token != (uint64_t)i) ++wrong;
        ++received;
        break;
      }
      if (now_s() > deadline) break;
    }
  }
  CHECK(received == n);
  CHECK(wrong == 0);
  complete_token(qc.queue, 7);  /* queued before or after the fd is asked for: readable either way */
  cuasync_queue_fd_args fa = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(api->queue_fd(&fa) == NULL);
  struct pollfd p = {fa.fd, POLLIN, 0};
  CHECK(poll(&p, 1, 10000) == 1);
  cuasync_completion_record rec[2];
  cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, qc.queue, rec, 2, 0};
  CHECK(api->queue_drain(&d) == NULL);
  CHECK(d.count == 1 && rec[0].token == 7);
  p.revents = 0;
  CHECK(poll(&p, 1, 0) == 0); /* cleared by the drain that returned fewer than asked for */
  printf("fd asked for late: %d of %d records drained by polling without it, then readable for the next\n", received,
         n);
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  CHECK(api->queue_destroy(&qd) == NULL);
}

/* Callbacks: run on the queue's thread, in order, each once. */
static atomic_int callbacks_run, callback_errors;
static void on_complete(const cuasync_completion_record* r, void* user) {
  if ((uint64_t)(intptr_t)user != r->token || r->code != CUASYNC_ERROR_CANCELLED) atomic_fetch_add(&callback_errors, 1);
  atomic_fetch_add(&callbacks_run, 1);
}

static void test_callbacks(void) {
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_CALLBACKS, NULL};
  CHECK(api->queue_create(&qc) == NULL);
  enum { n = 1000 };
  for (int i = 0; i < n; ++i) {
    cuasync_host_token_create_args c;
    memset(&c, 0, sizeof c);
    c.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
    c.completion.queue = qc.queue;
    c.completion.token = (uint64_t)i;
    c.completion.callback = on_complete;
    c.completion.user_data = (void*)(intptr_t)i;
    CHECK(api->host_token_create(&c) == NULL);
    cuasync_host_token_complete_args done = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, c.token, CUASYNC_ERROR_CANCELLED};
    CHECK(api->host_token_complete(&done) == NULL);
    CHECK(code_of(api->host_token_complete(&done)) == CUASYNC_ERROR_STALE_HANDLE); /* once */
  }
  const double deadline = now_s() + 30;
  while (atomic_load(&callbacks_run) < n && now_s() < deadline) {
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
  }
  printf("callbacks: %d of %d run\n", atomic_load(&callbacks_run), n);
  CHECK(atomic_load(&callbacks_run) == n);
  CHECK(atomic_load(&callback_errors) == 0);
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  CHECK(api->queue_destroy(&qd) == NULL);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH/libcuasync.so [--simulated | --gpu | --no-driver]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
  cuasync_get_api_fn get_api = (cuasync_get_api_fn)dlsym(lib, "cuasync_get_api");
  if (!get_api) {
    fprintf(stderr, "no cuasync_get_api in %s\n", argv[1]);
    return 2;
  }
  test_versions(get_api);
  if (!api) return 1;
  const char* mode = argc > 2 ? argv[2] : "";
  if (strcmp(mode, "--no-driver") == 0) { /* CUASYNC_LIBCUDA naming no library: what a machine without one sees */
    CHECK(test_no_driver() == 0);
    printf("conformance: %d checks, %d failed (no-driver part)\n", checks, failures);
    return failures ? 1 : 0;
  }
  test_struct_sizes();
  test_null_and_stale();
  test_abi_1_1();
  test_package_errors();
  const int devices = test_no_driver();
  test_fd_stress(256);
  test_fd_stress(1);
  test_fd_asked_late();
  test_callbacks();
  run_abi_1_2_part();
  run_abi_1_3_part(devices >= 1 && (strcmp(mode, "--gpu") == 0 || strcmp(mode, "--simulated") == 0));
  run_abi_1_4_part(devices >= 1 && (strcmp(mode, "--gpu") == 0 || strcmp(mode, "--simulated") == 0));
  run_abi_1_5_part();
  run_abi_1_7_part(devices >= 1 && (strcmp(mode, "--gpu") == 0 || strcmp(mode, "--simulated") == 0));
  if (strcmp(mode, "--gpu") == 0 || strcmp(mode, "--simulated") == 0) {
    CHECK(devices >= 1);
    if (devices >= 1) run_admission_part();
    if (devices >= 1) run_host_work_part();
    if (devices >= 1 && strcmp(mode, "--simulated") == 0) run_batches_part();
    if (devices >= 1) run_capture_part(strcmp(mode, "--gpu") == 0);
    if (devices >= 1) run_abi_1_6_part(strcmp(mode, "--gpu") == 0);
    if (devices >= 1 && strcmp(mode, "--gpu") == 0) run_gpu_part();
  }
  printf("conformance: %d checks, %d failed%s\n", checks, failures,
         *mode ? "" : " (no-GPU part; --simulated and --gpu run more)");
  return failures ? 1 : 0;
}
