// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's GPU part: cuasync driven through the C ABI on a stream that "a framework" made with raw
 * driver calls (libcuda opened here with dlopen, as a framework would have it): ABI 1.1's parameter sizes, untracked
 * launches, the stream captured into a CUDA graph (relaxed, and global while cuasync's poller queries events) and
 * DLPack tensors released to the caller. Ends with a fault, which every pending completion must report (the context
 * is unusable afterwards, so it runs last). */
#define _GNU_SOURCE
#include "conformance.h"

#include <cuda.h>
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
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
    "extern \"C\" __global__ void write_to(int* p, int v) { *p = v; }\n"
    "extern \"C\" __global__ void spin(long long cycles) {\n"
    "  long long start = clock64();\n"
    "  while (clock64() - start < cycles) {}\n"
    "}\n";

/* A 1-D float32 tensor of `*shape` elements at device address `data` (kDLCUDA, device 0). */
static dl_managed float_tensor(void* data, int64_t* shape, void (*deleter)(dl_managed*)) {
  dl_managed t;
  memset(&t, 0, sizeof t);
  t.version_major = 1;
  t.deleter = deleter;
  t.data = data;
  t.device_type = 2; /* kDLCUDA */
  t.device_id = 0;
  t.ndim = 1;
  t.dtype_code = 2; /* float */
  t.dtype_bits = 32;
  t.dtype_lanes = 1;
  t.shape = shape;
  return t;
}

static atomic_int deleted;
static void count_deleter(dl_managed* m) {
  (void)m;
  atomic_fetch_add(&deleted, 1);
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* The records queued now (without waiting). */
static size_t drain_now(cuasync_queue q, cuasync_completion_record* out, size_t capacity) {
  cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, q, out, capacity, 0};
  return ok(api->queue_drain(&d), "queue_drain") ? d.count : 0;
}

/* ---- kernel handles ------------------------------------------------------------------------------------------- */

/* kernel_get returns one handle per name (a binding that looks a kernel up on every call makes no new one), and no
 * handle outlives module_destroy, even from a kernel_get racing it on another thread. */
static cuasync_module racing_module;
static atomic_int racing_go;
enum { racing_max = 20000 };
static cuasync_kernel racing_got[racing_max];
static int racing_count;

static void* get_kernels(void* arg) {
  (void)arg;
  while (!atomic_load(&racing_go)) {
  }
  for (racing_count = 0; racing_count < racing_max;) {
    cuasync_kernel_get_args kg = {CUASYNC_KERNEL_GET_ARGS_SIZE, racing_module, racing_count % 2 ? "saxpy" : "spin",
                                  NULL, 0, NULL, 0, NULL, 0, NULL, 0};
    cuasync_error* e = api->kernel_get(&kg);
    if (e) {
      api->error_destroy(e);  /* the module went */
      break;
    }
    racing_got[racing_count++] = kg.kernel;
  }
  return NULL;
}

static void test_kernel_handles(cuasync_runtime rt, cuasync_stream s) {
  cuasync_compile_args cc;
  memset(&cc, 0, sizeof cc);
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = rt;
  cc.name = "saxpy.cu";
  cc.source = saxpy_source;
  if (!ok(api->compile(&cc), "compile")) return;
  cuasync_kernel_get_args a = {CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "saxpy", NULL, 0, NULL, 0, NULL, 0, NULL, 0};
  cuasync_kernel_get_args b = a, c = a;
  c.name = "spin";
  CHECK(ok(api->kernel_get(&a), "kernel_get") && ok(api->kernel_get(&b), "kernel_get again") &&
        ok(api->kernel_get(&c), "kernel_get spin"));
  CHECK(a.kernel == b.kernel && a.kernel != c.kernel && b.num_params == 4);
  int stale = 0, rounds = 0;
  for (; rounds < 20; ++rounds) {
    if (rounds) {
      cc.module = NULL;
      if (!ok(api->compile(&cc), "compile")) break;
    }
    racing_module = cc.module;
    atomic_store(&racing_go, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, get_kernels, NULL) != 0) break;
    atomic_store(&racing_go, 1);
    struct timespec pause = {0, 100000L * (rounds % 5)};
    nanosleep(&pause, NULL);
    cuasync_module_destroy_args md = {CUASYNC_MODULE_DESTROY_ARGS_SIZE, cc.module};
    CHECK(ok(api->module_destroy(&md), "module_destroy"));
    pthread_join(t, NULL);
    for (int i = 0; i < racing_count; ++i) {
      /* A live handle would reach the launch's argument check; a stale one fails before. */
      cuasync_launch_args l;
      memset(&l, 0, sizeof l);
      l.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
      l.stream = s;
      l.kernel = racing_got[i];
      l.flags = CUASYNC_LAUNCH_UNTRACKED;
      stale += code_of(api->launch(&l)) == CUASYNC_ERROR_STALE_HANDLE;
    }
    if (stale != racing_count) break;
    stale = 0;
  }
  CHECK(rounds == 20);  /* every handle of every round stale after its module_destroy */
  printf("gpu: kernel_get: one handle per name; %d rounds of kernel_get racing module_destroy left no live handle\n",
         rounds);
}

/* ---- ABI 1.1 ----------------------------------------------------------------------------------------------------- */

/* kernel_get reports the parameters' sizes, as many as the caller's array holds. */
static void test_param_sizes(cuasync_module m) {
  size_t sizes[6] = {99, 99, 99, 99, 99, 99};
  cuasync_kernel_get_args kg;
  memset(&kg, 0, sizeof kg);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.module = m;
  kg.name = "saxpy"; /* (float, const float*, float*, int) */
  kg.param_sizes = sizes;
  kg.param_sizes_capacity = 6;
  if (!ok(api->kernel_get(&kg), "kernel_get (param sizes)")) return;
  CHECK(kg.num_params == 4 && sizes[0] == 4 && sizes[1] == 8 && sizes[2] == 8 && sizes[3] == 4 && sizes[4] == 99);
  size_t first[2] = {99, 99};
  kg.name = "write_to"; /* (int*, int), one size asked for */
  kg.param_sizes = first;
  kg.param_sizes_capacity = 1;
  if (!ok(api->kernel_get(&kg), "kernel_get (one param size)")) return;
  CHECK(kg.num_params == 2 && first[0] == 8 && first[1] == 99);
  printf("gpu: kernel_get reported parameter sizes %zu %zu %zu %zu\n", sizes[0], sizes[1], sizes[2], sizes[3]);
}

/* The kernel `name` of `m` (NULL when kernel_get fails, which counts as a failure). */
static cuasync_kernel kernel_named(cuasync_module m, const char* name) {
  cuasync_kernel_get_args kg = {CUASYNC_KERNEL_GET_ARGS_SIZE, m, name, NULL, 0, NULL, 0, NULL, 0, NULL, 0};
  return ok(api->kernel_get(&kg), name) ? kg.kernel : NULL;
}

/* write_to(p, v) on `s`, tracked (a completion to `q` with `token`) or not. */
static cuasync_error* launch_write(cuasync_stream s, cuasync_kernel k, void* p, int v, int untracked, cuasync_queue q,
                                   uint64_t token) {
  cuasync_kernel_arg args[2] = {{&p, sizeof p}, {&v, sizeof v}};
  cuasync_launch_args la = launch_args_of(s, k, args, 2);
  if (untracked) {
    la.flags = CUASYNC_LAUNCH_UNTRACKED;
  } else {
    la.completion.queue = q;
    la.completion.token = token;
  }
  return api->launch(&la);
}

/* Copies the int at device address `p` to `*dst` on `s`, its completion to `q` with `token` (q NULL: none). */
static cuasync_error* copy_int(cuasync_stream s, int* dst, void* p, cuasync_queue q, uint64_t token) {
  cuasync_copy_args cp = {CUASYNC_COPY_ARGS_SIZE, s, dst, p, sizeof *dst, {q, token, NULL, NULL}};
  return api->copy(&cp);
}

/* The int at device address `p`, copied back on `s` (a tracked copy, after the work before it; its completion the only
 * record expected on `q` meanwhile). */
static int read_back(cuasync_stream s, void* p, cuasync_queue q, int fd) {
  static uint64_t next_token = 1000;
  const uint64_t token = next_token++;
  int value = -1;
  if (!ok(copy_int(s, &value, p, q, token), "copy (read back)")) return -1;
  cuasync_completion_record r;
  CHECK(drain_until(q, fd, &r, 1) == 1 && r.token == token && r.code == CUASYNC_OK);
  return value;
}

typedef struct graph_calls {
  CUresult (*begin)(CUstream, CUstreamCaptureMode);
  CUresult (*end)(CUstream, CUgraph*);
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*launch)(CUgraphExec, CUstream);
  CUresult (*exec_destroy)(CUgraphExec);
  CUresult (*destroy)(CUgraph);
} graph_calls;

/* Ends the capture on `raw` and reads `p` back (`*before`: the captured work has not run); then, `rounds` times,
 * writes 5 to `p` with an untracked launch, replays the graph on `raw` and reads `p` back. Returns the last value read
 * (-1 when a driver call failed). */
static int replay(const graph_calls* g, CUstream raw, cuasync_stream s, cuasync_kernel write, void* p, cuasync_queue q,
                  int fd, int rounds, int* before) {
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  const CUresult ended = g->end(raw, &graph);
  CHECK(ended == CUDA_SUCCESS && graph != NULL);
  if (ended != CUDA_SUCCESS || !graph) {
    fprintf(stderr, "cuStreamEndCapture: CUresult %d\n", (int)ended);
    return -1;
  }
  *before = read_back(s, p, q, fd);
  int value = -1;
  const CUresult instantiated = g->instantiate(&exec, graph, 0);
  CHECK(instantiated == CUDA_SUCCESS);
  for (int i = 0; i < rounds && instantiated == CUDA_SUCCESS; ++i) {
    CHECK(ok(launch_write(s, write, p, 5, 1, NULL, 0), "untracked launch"));
    CHECK(g->launch(exec, raw) == CUDA_SUCCESS);
    value = read_back(s, p, q, fd);
  }
  if (instantiated == CUDA_SUCCESS) CHECK(g->exec_destroy(exec) == CUDA_SUCCESS);
  CHECK(g->destroy(graph) == CUDA_SUCCESS);
  return value;
}

/* Untracked launches on the adopted stream: no admission (more than a stream's 64 places at once), correct results.
 * Then the stream captured into a CUDA graph: tracked and untracked operations captured and replayed (a pageable copy
 * and stream_wait refused);
 * and a global-mode capture (as torch.cuda.graph makes) that cuasync's poller, querying events of another stream
 * meanwhile, must not invalidate. */
static void test_untracked_and_capture(void* cuda, cuasync_runtime rt, cuasync_stream s, CUstream raw,
                                       cuasync_module m, cuasync_queue q, int fd) {
  graph_calls g;
  *(void**)&g.begin = dlsym(cuda, "cuStreamBeginCapture_v2");
  *(void**)&g.end = dlsym(cuda, "cuStreamEndCapture");
  *(void**)&g.instantiate = dlsym(cuda, "cuGraphInstantiateWithFlags");
  *(void**)&g.launch = dlsym(cuda, "cuGraphLaunch");
  *(void**)&g.exec_destroy = dlsym(cuda, "cuGraphExecDestroy");
  *(void**)&g.destroy = dlsym(cuda, "cuGraphDestroy");
  CHECK(g.begin && g.end && g.instantiate && g.launch && g.exec_destroy && g.destroy);
  if (!g.begin || !g.end || !g.instantiate || !g.launch || !g.exec_destroy || !g.destroy) return;

  cuasync_kernel write = kernel_named(m, "write_to");
  if (!write) return;
  cuasync_buffer_allocate_args ba = {CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE, rt, s, CUASYNC_MEMORY_DEVICE, 16, NULL, NULL};
  if (!ok(api->buffer_allocate(&ba), "buffer_allocate")) return;
  void* p = ba.pointer;

  /* 200 untracked launches at once: no place taken, so no CUASYNC_ERROR_BUSY (a stream admits 64 tracked ones). */
  int refused = 0;
  for (int i = 0; i < 200; ++i) refused += !ok(launch_write(s, write, p, i, 1, NULL, 0), "untracked launch");
  CHECK(refused == 0);
  const int after_untracked = read_back(s, p, q, fd);
  CHECK(after_untracked == 199);
  printf("gpu: 200 untracked launches on the adopted stream, then a tracked copy: read %d (199 expected)\n",
         after_untracked);

  /* Captured in relaxed mode (1.2.0, issue 30): tracked operations become graph nodes too, a completion asked there
   * comes at once ("captured"); what needs the work done now (stream_wait) and a pageable copy are refused. */
  CHECK(g.begin(raw, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
  CHECK(ok(launch_write(s, write, p, 1, 0, q, 1), "tracked launch (captured)"));
  cuasync_completion_record captured;
  CHECK(drain_until(q, fd, &captured, 1) == 1 && captured.token == 1 && captured.code == CUASYNC_OK);
  int host = 0;
  cuasync_error* e = copy_int(s, &host, p, NULL, 0);
  CHECK(message_has(e, "pageable") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  cuasync_memset_args ms = {CUASYNC_MEMSET_ARGS_SIZE, s, p, 0, 4, {NULL, 0, NULL, NULL}};
  CHECK(ok(api->memset(&ms), "memset (captured)"));
  cuasync_stream_wait_args sw = {CUASYNC_STREAM_WAIT_ARGS_SIZE, s, {q, 0, NULL, NULL}};
  e = api->stream_wait(&sw);
  CHECK(message_has(e, "being captured") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  cuasync_event_record_args er = {CUASYNC_EVENT_RECORD_ARGS_SIZE, s, NULL};
  CHECK(ok(api->event_record(&er), "event_record (captured)"));
  cuasync_event_destroy_args ed = {CUASYNC_EVENT_DESTROY_ARGS_SIZE, er.event};
  CHECK(ok(api->event_destroy(&ed), "event_destroy"));
  CHECK(ok(launch_write(s, write, p, 7, 1, NULL, 0), "untracked launch (captured)"));
  int before = -1;
  const int replayed = replay(&g, raw, s, write, p, q, fd, 2, &before);
  CHECK(before == 199 && replayed == 7);
  printf("gpu: relaxed capture: tracked and untracked launches and a memset captured: %d before the replay, %d "
         "after the second (199, 7 expected)\n", before, replayed);

  /* Captured in global mode while cuasync's poller queries events of another stream (two tracked kernels of ~100 ms
   * on a stream of cuasync's: the second has no host word, so its event is queried): the poller's thread is in
   * relaxed mode, so its queries leave the capture valid. */
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rt;
  cuasync_kernel spin = NULL;
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL}; /* the spins' own */
  cuasync_queue_fd_args qf = {CUASYNC_QUEUE_FD_ARGS_SIZE, NULL, -1};
  if (ok(api->stream_create(&sc), "stream_create") && (spin = kernel_named(m, "spin")) != NULL &&
      ok(api->queue_create(&qc), "queue_create") && (qf.queue = qc.queue, ok(api->queue_fd(&qf), "queue_fd"))) {
    long long cycles = 200000000LL; /* ~100 ms at 2 GHz */
    cuasync_kernel_arg spin_arg = {&cycles, sizeof cycles};
    cuasync_launch_args la;
    memset(&la, 0, sizeof la);
    la.struct_size = CUASYNC_LAUNCH_ARGS_SIZE;
    la.stream = sc.stream;
    la.kernel = spin;
    la.args = &spin_arg;
    la.num_args = 1;
    la.completion.queue = qc.queue;
    la.completion.token = 2;
    CHECK(ok(api->launch(&la), "launch spin"));
    la.completion.token = 3;
    CHECK(ok(api->launch(&la), "launch spin"));
    CHECK(g.begin(raw, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    CHECK(ok(launch_write(s, write, p, 11, 1, NULL, 0), "untracked launch (global capture)"));
    sleep_ms(30); /* the poller queries meanwhile */
    /* The capture ends valid; the spins complete without an error (their events' queries were not refused). */
    const int value = replay(&g, raw, s, write, p, q, fd, 1, &before);
    CHECK(before == 7 && value == 11);
    cuasync_completion_record r[2];
    CHECK(drain_until(qc.queue, qf.fd, r, 2) == 2);
    CHECK(r[0].token == 2 && r[0].code == CUASYNC_OK && r[1].token == 3 && r[1].code == CUASYNC_OK);
    printf("gpu: a global capture while cuasync's poller queried another stream's events: replayed %d (11 "
           "expected)\n", value);
  }
  if (qc.queue) {
    cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
    CHECK(ok(api->queue_destroy(&qd), "queue_destroy"));
  }
  if (sc.stream) {
    cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
    CHECK(ok(api->stream_destroy(&sd), "stream_destroy"));
  }
  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, ba.buffer};
  CHECK(ok(api->buffer_free(&bf), "buffer_free"));
}

static atomic_int released_deleted;
static void count_released_deleter(dl_managed* m) {
  (void)m;
  atomic_fetch_add(&released_deleted, 1);
}

/* A tensor imported with `released` set: cuasync never calls its deleter; exactly one record arrives after the free,
 * and the caller then calls the deleter itself. A failed import delivers nothing. */
static void test_import_released(cuasync_runtime rt, cuasync_stream s, cuasync_queue q, int fd, void* data, int64_t count) {
  dl_managed t = float_tensor(data, &count, count_released_deleter);
  t.device_type = 1; /* kDLCPU: refused */
  cuasync_buffer_import_dlpack_args im;
  memset(&im, 0, sizeof im);
  im.struct_size = CUASYNC_BUFFER_IMPORT_DLPACK_ARGS_SIZE;
  im.runtime = rt;
  im.stream = s;
  im.managed = &t;
  im.released.queue = q;
  im.released.token = 300;
  CHECK(code_of(api->buffer_import_dlpack(&im)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  t.device_type = 2; /* kDLCUDA */
  if (!ok(api->buffer_import_dlpack(&im), "buffer_import_dlpack (released)")) return;
  cuasync_completion_record r[2];
  CHECK(drain_now(q, r, 2) == 0); /* nothing before the free, nothing of the failed import */
  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, im.buffer};
  CHECK(ok(api->buffer_free(&bf), "buffer_free (imported, released)"));
  CHECK(drain_until(q, fd, r, 1) == 1 && r[0].token == 300 && r[0].code == CUASYNC_OK);
  sleep_ms(50);
  CHECK(drain_now(q, r, 2) == 0); /* exactly one */
  CHECK(atomic_load(&released_deleted) == 0); /* cuasync left the deleter to the caller */
  t.deleter(&t);
  CHECK(atomic_load(&released_deleted) == 1);
  printf("gpu: an imported tensor released to the caller: one record after the free, the deleter not called by cuasync\n");
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

/* Handles destroyed in any order (a garbage collector's): a buffer keeps the stream it is freed in the order of.
 * And the legacy default stream (PyTorch's and CuPy's default) adopted in the runtime's context. */
static void test_stream_lifetimes(cuasync_runtime rt, cuasync_queue q, int fd) {
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rt;
  if (!ok(api->stream_create(&sc), "stream_create")) return;
  cuasync_buffer_allocate_args b;
  memset(&b, 0, sizeof b);
  b.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  b.runtime = rt;
  b.stream = sc.stream;
  b.kind = CUASYNC_MEMORY_DEVICE;
  b.size = 1 << 20;
  if (!ok(api->buffer_allocate(&b), "buffer_allocate")) return;
  cuasync_memset_args ms;
  memset(&ms, 0, sizeof ms);
  ms.struct_size = CUASYNC_MEMSET_ARGS_SIZE;
  ms.stream = sc.stream;
  ms.dst = b.pointer;
  ms.value = 7;
  ms.size = b.size;
  CHECK(ok(api->memset(&ms), "memset"));
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
  CHECK(api->stream_destroy(&sd) == NULL);
  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, b.buffer};
  CHECK(ok(api->buffer_free(&bf), "buffer_free after its stream's handle went"));

  sc.native = (void*)(uintptr_t)1; /* CU_STREAM_LEGACY */
  sc.stream = NULL;
  if (!ok(api->stream_create(&sc), "stream_create (the legacy default stream)")) return;
  cuasync_stream_native_args sn = {CUASYNC_STREAM_NATIVE_ARGS_SIZE, sc.stream, NULL, NULL};
  CHECK(api->stream_native(&sn) == NULL && sn.native == (void*)(uintptr_t)1 && sn.context != NULL);
  cuasync_stream_wait_args w;
  memset(&w, 0, sizeof w);
  w.struct_size = CUASYNC_STREAM_WAIT_ARGS_SIZE;
  w.stream = sc.stream;
  w.completion.queue = q;
  w.completion.token = 77;
  CHECK(ok(api->stream_wait(&w), "stream_wait on the legacy default stream"));
  cuasync_completion_record r[1];
  CHECK(drain_until(q, fd, r, 1) == 1 && r[0].token == 77 && r[0].code == CUASYNC_OK);
  sd.stream = sc.stream;
  CHECK(api->stream_destroy(&sd) == NULL);
  printf("gpu: a buffer freed after its stream's handle; the legacy default stream adopted and awaited\n");
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
  cuasync_kernel_get_args kg = {CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "saxpy", NULL, 0, NULL, 0, NULL, 0, NULL, 0};
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

  test_stream_lifetimes(rc.runtime, qc.queue, qf.fd);

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
  int64_t shape = n;
  dl_managed mine = float_tensor(bx.pointer, &shape, count_deleter);
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

  /* ABI 1.1 */
  test_param_sizes(cc.module);
  test_kernel_handles(rc.runtime, sc.stream);
  test_untracked_and_capture(cuda, rc.runtime, sc.stream, framework_stream, cc.module, qc.queue, qf.fd);
  test_import_released(rc.runtime, sc.stream, qc.queue, qf.fd, bx.pointer, n);

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
  cuasync_kernel_get_args kw = {CUASYNC_KERNEL_GET_ARGS_SIZE, cc.module, "write_to", NULL, 0, NULL, 0,
                                NULL, 0, NULL, 0};
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
