// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The tutorial's C service (docs/tutorial.md): the C++ tutorial's request through the stable C ABI, as a framework in
 * any language would make it. libcuasync.so is loaded with dlopen (no link-time dependency, no C++ in this program);
 * a kernel is compiled by NVRTC at run time, the input copied in, the kernel launched, the result copied out, and the
 * three completions awaited through a completion queue's file descriptor in a poll() loop (an application would
 * watch the same fd in its epoll, libuv or Qt loop). Without a GPU it still runs a host completion through that
 * queue and fd, then says "no GPU: <reason>" and exits 3.
 *
 * Usage: example_c_service [path/to/libcuasync.so]   (default: $CUASYNC_LIBRARY, else libcuasync.so) */
#include <cuasync/cuasync.h>

#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

static const cuasync_api* api;

/* [errors] */
/* Every call returns NULL or an error the caller owns: print it with the call's name, free it, return its code. */
static cuasync_error_code failed(const char* call, cuasync_error* e) {
  if (e == NULL) return CUASYNC_OK;
  cuasync_error_info_args info = {CUASYNC_ERROR_INFO_ARGS_SIZE, e};
  api->error_info(&info);
  cuasync_error_code code = info.code;
  if (code == CUASYNC_ERROR_NO_DRIVER)
    printf("no GPU: %s\n", info.message);
  else
    fprintf(stderr, "%s: %s\n", call, info.message);
  api->error_destroy(e);
  return code;
}
/* [errors] */

/* [await] */
/* Waits for the completion of `token` on `queue` and returns its code, or the first failure among the records drained
 * before it. The fd protocol: when it is readable, drain until a drain returns fewer records than asked for. */
static cuasync_error_code await_token(cuasync_queue queue, int fd, uint64_t token) {
  for (;;) {
    cuasync_completion_record records[8];
    cuasync_queue_drain_args drain = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, queue, records, 8, 0};
    do {
      if (failed("queue_drain", api->queue_drain(&drain))) return CUASYNC_ERROR_INTERNAL;
      for (size_t i = 0; i < drain.count; ++i) {
        if (records[i].code != CUASYNC_OK) {
          fprintf(stderr, "completion %llu: code %d (CUresult %d)\n", (unsigned long long)records[i].token,
                  (int)records[i].code, records[i].cuda_result);
          return records[i].code;
        }
        if (records[i].token == token) return CUASYNC_OK;
      }
    } while (drain.count == drain.capacity);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) == 0) {
      fprintf(stderr, "completion %llu: nothing in 10 s\n", (unsigned long long)token);
      return CUASYNC_ERROR_INTERNAL;
    }
  }
}
/* [await] */

/* [kernel] */
static const char* kernel_source =
    "extern \"C\" __global__ void affine(float* x, float a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = a * x[i] + 1.0f;\n"
    "}\n";
/* [kernel] */

enum { n = 1 << 20 };

int main(int argc, char** argv) {
  /* [load] */
  const char* path = argc > 1 ? argv[1] : getenv("CUASYNC_LIBRARY") ? getenv("CUASYNC_LIBRARY") : "libcuasync.so";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "c_service: %s\n", dlerror());
    return 1;
  }
  cuasync_get_api_fn get_api = (cuasync_get_api_fn)dlsym(lib, "cuasync_get_api");
  if (get_api == NULL || failed("cuasync_get_api", get_api(CUASYNC_ABI_MAJOR, &api))) return 1;
  printf("c_service: cuasync C ABI %u.%u from %s\n", api->abi_major, api->abi_minor, path);
  /* [load] */

  /* [queue] */
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD};
  if (failed("queue_create", api->queue_create(&qc))) return 1;
  cuasync_queue_fd_args qf = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue};
  if (failed("queue_fd", api->queue_fd(&qf))) return 1;
  /* Host work completes through the same queue as GPU work: a host token, completed here at once. */
  cuasync_host_token_create_args ht = {CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE, {qc.queue, 100}};
  if (failed("host_token_create", api->host_token_create(&ht))) return 1;
  cuasync_host_token_complete_args hc = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, ht.token, CUASYNC_OK};
  if (failed("host_token_complete", api->host_token_complete(&hc)) || await_token(qc.queue, qf.fd, 100)) return 1;
  printf("c_service: a host completion came through the queue's fd %d\n", qf.fd);
  /* [queue] */

  /* [request] */
  cuasync_runtime_create_args rc = {CUASYNC_RUNTIME_CREATE_ARGS_SIZE, 0 /* device 0's primary context */};
  cuasync_error_code code = failed("runtime_create", api->runtime_create(&rc));
  if (code == CUASYNC_ERROR_NO_DRIVER) return 3;
  if (code) return 1;
  cuasync_stream_create_args sc = {CUASYNC_STREAM_CREATE_ARGS_SIZE, rc.runtime}; /* a new non-blocking stream */
  if (failed("stream_create", api->stream_create(&sc))) return 1;
  cuasync_compile_args cc = {CUASYNC_COMPILE_ARGS_SIZE, rc.runtime, "tutorial_affine.cu", kernel_source};
  if (failed("compile", api->compile(&cc))) return 1; /* NVRTC, through cuasync's memory and disk caches */
  cuasync_kernel_get_args kg = {CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "affine"};
  if (failed("kernel_get", api->kernel_get(&kg))) return 1;
  cuasync_buffer_allocate_args ba = {CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE, rc.runtime, sc.stream,
                                     CUASYNC_MEMORY_DEVICE, n * sizeof(float)};
  if (failed("buffer_allocate", api->buffer_allocate(&ba))) return 1; /* stream-ordered, from the device's pool */

  float* data = malloc(n * sizeof(float)); /* pageable: cuasync stages it through pinned memory */
  for (int i = 0; i < n; ++i) data[i] = (float)(i % 1000);
  float a = 2.0f;
  int count = n;
  cuasync_kernel_arg args[] = {{&ba.pointer, sizeof ba.pointer}, {&a, sizeof a}, {&count, sizeof count}};
  cuasync_copy_args in = {CUASYNC_COPY_ARGS_SIZE, sc.stream, ba.pointer, data, n * sizeof(float), {qc.queue, 1}};
  cuasync_launch_args launch = {CUASYNC_LAUNCH_ARGS_SIZE, sc.stream, kg.kernel, {(n + 255) / 256}, {256}, 0,
                                args, 3, {qc.queue, 2}};
  cuasync_copy_args out = {CUASYNC_COPY_ARGS_SIZE, sc.stream, data, ba.pointer, n * sizeof(float), {qc.queue, 3}};
  /* Three calls that enqueue and return; none waits for the GPU. */
  if (failed("copy", api->copy(&in)) || failed("launch", api->launch(&launch)) || failed("copy", api->copy(&out)))
    return 1;
  if (await_token(qc.queue, qf.fd, 3)) return 1; /* in stream order: 1 and 2 completed before 3 */
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += data[i] != 2.0f * (float)(i % 1000) + 1.0f;
  printf("c_service: 1 request served, %d wrong elements\n", wrong);
  /* [request] */

  /* [cleanup] */
  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, ba.buffer};
  cuasync_module_destroy_args md = {CUASYNC_MODULE_DESTROY_ARGS_SIZE, cc.module};
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
  cuasync_runtime_destroy_args rd = {CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, rc.runtime};
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  if (failed("buffer_free", api->buffer_free(&bf)) || failed("module_destroy", api->module_destroy(&md)) ||
      failed("stream_destroy", api->stream_destroy(&sd)) || failed("runtime_destroy", api->runtime_destroy(&rd)) ||
      failed("queue_destroy", api->queue_destroy(&qd)))
    return 1;
  free(data); /* the copies completed: nothing of cuasync's reads it any more */
  /* [cleanup] */
  return wrong == 0 ? 0 : 1;
}
