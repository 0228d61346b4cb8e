/* The conformance suite's GPU part: cuasync driven through the C ABI on a stream that "a framework" made with raw
 * driver calls (libcuda opened here with dlopen, as a framework would have it). Ends with a fault, which every pending
 * completion must report (the context is unusable afterwards, so it runs last). */
#define _GNU_SOURCE
#include "conformance.h"

#include <cuda.h>
#include <dlfcn.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char* saxpy_source =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n"
    "extern \"C\" __global__ void write_to(int* p, int v) { *p = v; }\n";

/* Records from the fd until `want` arrived (or 30 s). */
static int drain_until(cuasync_queue q, int fd, cuasync_completion_record* out, int want) {
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
static atomic_int deleted;
static void count_deleter(dl_managed* m) {
  (void)m;
  atomic_fetch_add(&deleted, 1);
}

static atomic_int callback_done;
static atomic_int callback_code;
static void on_copied(const cuasync_completion_record* r, void* user) {
  (void)user;
  atomic_store(&callback_code, (int)r->code);
  atomic_store(&callback_done, 1);
}

/* Everything the GPU part made, destroyed (after the fault the destroys may report it: their errors are freed). */
static void destroy_all(cuasync_buffer* buffers, int n, cuasync_queue q, cuasync_module m, cuasync_stream s,
                        cuasync_runtime rt) {
  for (int i = 0; i < n; ++i) {
    cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, buffers[i]};
    api->error_destroy(api->buffer_free(&bf));
  }
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, q};
  api->error_destroy(api->queue_destroy(&qd));
  cuasync_module_destroy_args md = {CUASYNC_MODULE_DESTROY_ARGS_SIZE, m};
  api->error_destroy(api->module_destroy(&md));
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, s};
  api->error_destroy(api->stream_destroy(&sd));
  cuasync_runtime_destroy_args rd = {CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, rt};
  api->error_destroy(api->runtime_destroy(&rd));
}

void run_gpu_part(void) {
  /* The framework's side: its own stream on the device's primary context, made with raw driver calls. */
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  CHECK(cuda != NULL);
  if (!cuda) return;
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(cuda, "cuInit");
  CUresult (*device_get)(CUdevice*, int) = (CUresult(*)(CUdevice*, int))dlsym(cuda, "cuDeviceGet");
  CUresult (*retain)(CUcontext*, CUdevice) = (CUresult(*)(CUcontext*, CUdevice))dlsym(cuda, "cuDevicePrimaryCtxRetain");
  CUresult (*set_current)(CUcontext) = (CUresult(*)(CUcontext))dlsym(cuda, "cuCtxSetCurrent");
  CUresult (*stream_create)(CUstream*, unsigned) = (CUresult(*)(CUstream*, unsigned))dlsym(cuda, "cuStreamCreate");
  CUdevice dev;
  CUcontext ctx;
  CUstream framework_stream;
  CHECK(init(0) == CUDA_SUCCESS && device_get(&dev, 0) == CUDA_SUCCESS && retain(&ctx, dev) == CUDA_SUCCESS);
  CHECK(set_current(ctx) == CUDA_SUCCESS && stream_create(&framework_stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);

  /* cuasync on the same (primary) context, the framework's stream adopted. */
  cuasync_runtime_create_args rc;
  memset(&rc, 0, sizeof rc);
  rc.struct_size = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
  if (!ok(api->runtime_create(&rc), "runtime_create")) return;
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rc.runtime;
  sc.native = framework_stream;
  if (!ok(api->stream_create(&sc), "stream_create (adopt)")) return;
  cuasync_stream_native_args sn = {CUASYNC_STREAM_NATIVE_ARGS_SIZE, sc.stream, NULL, NULL};
  CHECK(api->stream_native(&sn) == NULL && sn.native == (void*)framework_stream && sn.context == (void*)ctx);

  /* A kernel compiled at run time. */
  const char* opts[] = {"--std=c++17"};
  cuasync_compile_args cc;
  memset(&cc, 0, sizeof cc);
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = rc.runtime;
  cc.name = "saxpy.cu";
  cc.source = saxpy_source;
  cc.options = opts;
  cc.num_options = 1;
  if (!ok(api->compile(&cc), "compile")) return;
  cuasync_kernel_get_args kg = {CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "saxpy", NULL, 0};
  if (!ok(api->kernel_get(&kg), "kernel_get")) return;
  CHECK(kg.num_params == 4);

  /* Queues: an fd for the copies in, a callback for the copy out. */
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD | CUASYNC_QUEUE_CALLBACKS, NULL};
  if (!ok(api->queue_create(&qc), "queue_create")) return;
  cuasync_queue_fd_args qf = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(api->queue_fd(&qf) == NULL);

  enum { n = 3 << 20 }; /* 12 MiB of floats: more than one staging chunk */
  float* x = malloc(n * sizeof(float));  /* pageable, as a framework's host tensors often are */
  float* y = malloc(n * sizeof(float));
  float* out = malloc(n * sizeof(float));
  for (int i = 0; i < n; ++i) {
    x[i] = (float)(i % 1000) * 0.5f;
    y[i] = (float)(i % 7);
  }
  cuasync_buffer_allocate_args bx, by;
  memset(&bx, 0, sizeof bx);
  bx.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  bx.runtime = rc.runtime;
  bx.stream = sc.stream;
  bx.kind = CUASYNC_MEMORY_DEVICE;
  bx.size = n * sizeof(float);
  by = bx;
  CHECK(api->buffer_allocate(&bx) == NULL && api->buffer_allocate(&by) == NULL);
  cuasync_copy_args cp;
  memset(&cp, 0, sizeof cp);
  cp.struct_size = CUASYNC_COPY_ARGS_SIZE;
  cp.stream = sc.stream;
  cp.size = n * sizeof(float);
  cp.completion.queue = qc.queue;
  cp.dst = bx.pointer, cp.src = x, cp.completion.token = 1;
  CHECK(ok(api->copy(&cp), "copy x"));
  cp.dst = by.pointer, cp.src = y, cp.completion.token = 2;
  CHECK(ok(api->copy(&cp), "copy y"));

  float alpha = 2.0f;
  int count = n;
  void* xp = bx.pointer;
  void* yp = by.pointer;
  cuasync_kernel_arg args[4] = {{&alpha, sizeof alpha}, {&xp, sizeof xp}, {&yp, sizeof yp}, {&count, sizeof count}};
  cuasync_launch_args la;
  memset(&la, 0, sizeof la);
  la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
  la.stream = sc.stream;
  la.kernel = kg.kernel;
  la.grid[0] = (n + 255) / 256;
  la.block[0] = 256;
  la.args = args;
  la.num_args = 4;
  la.completion.queue = qc.queue;
  la.completion.token = 3;
  /* A wrong argument size is refused before anything is enqueued. */
  args[3].size = 8;
  CHECK(code_of(api->launch(&la)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  args[3].size = sizeof count;
  CHECK(ok(api->launch(&la), "launch"));
  cp.dst = out, cp.src = by.pointer, cp.completion.token = 4;
  cp.completion.callback = on_copied;
  CHECK(ok(api->copy(&cp), "copy out"));

  cuasync_completion_record recs[8];
  CHECK(drain_until(qc.queue, qf.fd, recs, 3) == 3);
  for (int i = 0; i < 3; ++i) CHECK(recs[i].code == CUASYNC_OK);
  for (int i = 0; i < 3000 && !atomic_load(&callback_done); ++i) {
    struct timespec t = {0, 10000000};
    nanosleep(&t, NULL);
  }
  CHECK(atomic_load(&callback_done) && atomic_load(&callback_code) == CUASYNC_OK);
  int wrong = 0;
  for (int i = 0; i < n; ++i) wrong += out[i] != 2.0f * x[i] + y[i];
  printf("gpu: saxpy of %d floats through the C ABI on a framework's stream: %d wrong\n", n, wrong);
  CHECK(wrong == 0);

  /* A stream the framework synchronized takes a full stream's worth of launches at once (64 by default), round after
   * round: places come back when cuasync sees the work done, which may lag the stream going idle; a launch that
   * finds none looks again before it answers CUASYNC_ERROR_BUSY. */
  {
    CUresult (*stream_sync)(CUstream) = (CUresult(*)(CUstream))dlsym(cuda, "cuStreamSynchronize");
    int zero = 0, busy = 0;
    cuasync_kernel_arg empty_args[4] = {
        {&alpha, sizeof alpha}, {&xp, sizeof xp}, {&yp, sizeof yp}, {&zero, sizeof zero}};
    cuasync_launch_args burst = la;
    burst.args = empty_args;
    burst.grid[0] = 1;
    memset(&burst.completion, 0, sizeof burst.completion);
    for (int round = 0; round < 20; ++round) {
      for (int i = 0; i < 64; ++i) {
        cuasync_error* e = api->launch(&burst);
        if (e) {
          print_error("launch in a burst", e);
          busy += code_of(e) == CUASYNC_ERROR_BUSY;
          break;
        }
      }
      CHECK(stream_sync(framework_stream) == CUDA_SUCCESS);
    }
    printf("gpu: 20 bursts of 64 launches, the stream synchronized between them: %d refused as busy\n", busy);
    CHECK(busy == 0);
  }

  /* DLPack: y exported to "the framework" (its stream made to wait on the device), and a tensor of the framework's
   * imported: its deleter runs once, after cuasync's work on it. */
  cuasync_buffer_export_dlpack_args ex;
  memset(&ex, 0, sizeof ex);
  ex.struct_size = CUASYNC_BUFFER_EXPORT_DLPACK_ARGS_SIZE;
  ex.buffer = by.buffer;
  ex.stream = sc.stream;
  ex.consumer_stream = (intptr_t)framework_stream;
  ex.dtype_code = 2; /* float */
  ex.dtype_bits = 32;
  if (ok(api->buffer_export_dlpack(&ex), "buffer_export_dlpack")) {
    dl_managed* m = (dl_managed*)ex.managed;
    CHECK(m->version_major == 1 && m->data == by.pointer && m->ndim == 1 && m->shape[0] == n);
    m->deleter(m); /* the consumer is done with it */
  }
  dl_managed mine;
  memset(&mine, 0, sizeof mine);
  int64_t shape = n;
  mine.version_major = 1;
  mine.deleter = count_deleter;
  mine.data = bx.pointer;
  mine.device_type = 2; /* kDLCUDA */
  mine.device_id = 0;
  mine.ndim = 1;
  mine.dtype_code = 2;
  mine.dtype_bits = 32;
  mine.dtype_lanes = 1;
  mine.shape = &shape;
  cuasync_buffer_import_dlpack_args im;
  memset(&im, 0, sizeof im);
  im.struct_size = CUASYNC_BUFFER_IMPORT_DLPACK_ARGS_SIZE;
  im.runtime = rc.runtime;
  im.stream = sc.stream;
  im.managed = &mine;
  if (ok(api->buffer_import_dlpack(&im), "buffer_import_dlpack")) {
    CHECK(im.pointer == bx.pointer && im.size == (size_t)n * sizeof(float));
    cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, im.buffer};
    CHECK(ok(api->buffer_free(&bf), "buffer_free (imported)"));
    for (int i = 0; i < 500 && atomic_load(&deleted) == 0; ++i) {
      struct timespec t = {0, 10000000};
      nanosleep(&t, NULL);
    }
    struct timespec t = {0, 50000000};
    nanosleep(&t, NULL);
    CHECK(atomic_load(&deleted) == 1); /* once */
  }

  /* A fault reaches every pending completion: the faulting launch, then waits behind it. Left out under
   * compute-sanitizer (CUASYNC_NO_FAULT=1): the sanitizer would report the intended out-of-bounds write. */
  if (getenv("CUASYNC_NO_FAULT")) {
    printf("gpu: the fault part left out (CUASYNC_NO_FAULT)\n");
    cuasync_buffer bufs[2] = {bx.buffer, by.buffer};
    destroy_all(bufs, 2, qc.queue, cc.module, sc.stream, rc.runtime);
    free(x);
    free(y);
    free(out);
    return;
  }
  cuasync_kernel_get_args kw = {CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "write_to", NULL, 0};
  CHECK(ok(api->kernel_get(&kw), "kernel_get write_to"));
  void* bad = (void*)(uintptr_t)0x10;
  int value = 1;
  cuasync_kernel_arg fault_args[2] = {{&bad, sizeof bad}, {&value, sizeof value}};
  la.kernel = kw.kernel;
  la.grid[0] = 1;
  la.block[0] = 1;
  la.args = fault_args;
  la.num_args = 2;
  la.completion.token = 10;
  CHECK(ok(api->launch(&la), "launch write_to"));
  cuasync_stream_wait_args sw;
  memset(&sw, 0, sizeof sw);
  sw.struct_size = CUASYNC_STREAM_WAIT_ARGS_SIZE;
  sw.stream = sc.stream;
  sw.completion.queue = qc.queue;
  for (int i = 0; i < 3; ++i) {
    sw.completion.token = 11 + (uint64_t)i;
    CHECK(ok(api->stream_wait(&sw), "stream_wait"));
  }
  CHECK(drain_until(qc.queue, qf.fd, recs, 4) == 4);
  for (int i = 0; i < 4; ++i) CHECK(recs[i].code == CUASYNC_ERROR_CUDA && recs[i].cuda_result == 700);
  printf("gpu: a fault reached %d pending completions as CUDA_ERROR_ILLEGAL_ADDRESS\n", 4);
  cuasync_buffer bufs[2] = {bx.buffer, by.buffer};
  destroy_all(bufs, 2, qc.queue, cc.module, sc.stream, rc.runtime);
  free(x);
  free(y);
  free(out);
  return;
}
