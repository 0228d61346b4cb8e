// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* A fresh process's first operations through the C ABI, on the simulated driver: they must not allocate pinned memory
 * (cuMemHostAlloc) on the calling thread. There such a call waits behind any other thread's in the driver (the
 * runtime's staging reservation, made in the background at its creation): a first pageable copy's call took 126 ms on
 * an H100 (bench/results/h100-session20/b365d4d-cold-paths.txt). The runtime's creation may allocate; the first
 * memset, pageable copies both ways and their completions may not.
 * Usage: cuasync_first_calls PATH/libcuasync.so (CUASYNC_LIBCUDA naming the simulated driver). */
#define _POSIX_C_SOURCE 200809L
#include <cuasync/cuasync.h>

#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const cuasync_api* api;
static int failures;

static int ok(cuasync_error* e, const char* what) {
  if (!e) return 1;
  cuasync_error_info_args info;
  memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = e;
  api->error_info(&info);
  fprintf(stderr, "FAILED %s: %s\n", what, info.message ? info.message : "?");
  api->error_destroy(e);
  ++failures;
  return 0;
}

/* Waits up to `ms` for the queue's fd, then drains it: the records taken (each checked), or -1 on a timeout. */
static int drain(cuasync_queue q, int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return ms > 1 ? -1 : 0;
  cuasync_completion_record records[4];
  cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, q, records, 4, 0};
  if (!ok(api->queue_drain(&d), "queue_drain")) return -1;
  for (size_t i = 0; i < d.count; ++i)
    if (records[i].code != CUASYNC_OK) {
      fprintf(stderr, "FAILED: completion %llu code %d\n", (unsigned long long)records[i].token, records[i].code);
      ++failures;
    }
  return (int)d.count;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PATH/libcuasync.so\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  const char* driver_path = getenv("CUASYNC_LIBCUDA");
  void* driver = driver_path ? dlopen(driver_path, RTLD_NOW) : NULL;
  long (*calls_here)(const char*) = driver ? (long (*)(const char*))dlsym(driver, "fake_cuda_calls_on_this_thread") : NULL;
  if (!lib || !calls_here) {
    fprintf(stderr, "first_calls: needs libcuasync.so and CUASYNC_LIBCUDA naming the simulated driver\n");
    return 2;
  }
  cuasync_get_api_fn get_api = (cuasync_get_api_fn)dlsym(lib, "cuasync_get_api");
  if (!get_api || get_api(CUASYNC_ABI_MAJOR, &api)) return 2;

  cuasync_runtime_create_args rc = {CUASYNC_RUNTIME_CREATE_ARGS_SIZE, 0, NULL, NULL};
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  if (!ok(api->runtime_create(&rc), "runtime_create")) return 1;
  sc.runtime = rc.runtime;
  if (!ok(api->stream_create(&sc), "stream_create") || !ok(api->queue_create(&qc), "queue_create")) return 1;
  cuasync_queue_fd_args fa = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  if (!ok(api->queue_fd(&fa), "queue_fd")) return 1;
  const size_t bytes = (size_t)1 << 20;
  cuasync_buffer_allocate_args ba;
  memset(&ba, 0, sizeof ba);
  ba.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  ba.runtime = rc.runtime;
  ba.stream = sc.stream;
  ba.kind = CUASYNC_MEMORY_DEVICE;
  ba.size = bytes;
  if (!ok(api->buffer_allocate(&ba), "buffer_allocate")) return 1;
  unsigned char* host = malloc(bytes);
  unsigned char* back = malloc(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = (unsigned char)(i * 7);

  /* Pinned allocations (cuMemHostAlloc, or cuMemHostRegister of memory the runtime allocated) on this thread. */
  const long before = calls_here("cuMemHostAlloc") + calls_here("cuMemHostRegister");
  cuasync_memset_args m;
  memset(&m, 0, sizeof m);
  m.struct_size = CUASYNC_MEMSET_ARGS_SIZE;
  m.stream = sc.stream;
  m.dst = ba.pointer;
  m.size = bytes;
  m.completion.queue = qc.queue;
  m.completion.token = 1;
  cuasync_copy_args in = {CUASYNC_COPY_ARGS_SIZE, sc.stream, ba.pointer, host, bytes, {qc.queue, 2, NULL, NULL}};
  cuasync_copy_args out = {CUASYNC_COPY_ARGS_SIZE, sc.stream, back, ba.pointer, bytes, {qc.queue, 3, NULL, NULL}};
  /* A pageable copy may answer BUSY while the one before it still holds the stream (the caller retries after a
   * completion, as any C ABI caller does): each is retried, draining completions meanwhile. */
  int done = 0;
  int issued = 1;
  for (int op = 0; op < 3 && issued; ++op) {
    for (int tries = 0;; ++tries) {
      cuasync_error* e = op == 0 ? api->memset(&m) : op == 1 ? api->copy(&in) : api->copy(&out);
      if (!e) break;
      cuasync_error_info_args info;
      memset(&info, 0, sizeof info);
      info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
      info.error = e;
      api->error_info(&info);
      if (info.code != CUASYNC_ERROR_BUSY || tries > 30000) {
        issued = ok(e, op == 0 ? "memset" : op == 1 ? "copy H2D" : "copy D2H");
        break;
      }
      api->error_destroy(e);
      const int n = drain(qc.queue, fa.fd, 1);
      if (n > 0) done += n;
    }
  }
  while (issued && done < 3) {
    const int n = drain(qc.queue, fa.fd, 30000);
    if (n < 0) {
      fprintf(stderr, "FAILED: %d of 3 completions within 30 s\n", done);
      ++failures;
      break;
    }
    done += n;
  }
  const long during = calls_here("cuMemHostAlloc") + calls_here("cuMemHostRegister") - before;
  if (issued && memcmp(host, back, bytes) != 0) {
    fprintf(stderr, "FAILED: the bytes that came back differ from those sent\n");
    ++failures;
  }
  printf("first_calls: %ld pinned allocations on the calling thread during the first memset and copies (0 expected)\n",
         during);
  if (during != 0) ++failures;

  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, ba.buffer};
  ok(api->buffer_free(&bf), "buffer_free");
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
  ok(api->stream_destroy(&sd), "stream_destroy");
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  ok(api->queue_destroy(&qd), "queue_destroy");
  cuasync_runtime_destroy_args rd = {CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, rc.runtime};
  ok(api->runtime_destroy(&rd), "runtime_destroy");
  free(host);
  free(back);
  printf("first_calls: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
