// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's part about capture-transparent operations (issue 30): inside the caller's own
 * cuStreamBeginCapture on a stream whose handle stream_native gave out, a JIT kernel's launches, memsets, a pinned
 * copy and a hand-off between two streams through event_record/event_wait become graph nodes (no place held, no
 * event recorded that the capture could not hold), the capture is still active after every cuasync call, a completion
 * asked there comes at once ("captured": CUASYNC_OK), what needs the work done (stream_wait, event_query of a captured
 * event) and a pageable copy are refused with a clear error, and the instantiated graph does the work at every launch. On the
 * simulated driver (--simulated: 100 replays) and on a GPU (--gpu: CUASYNC_CAPTURE_REPLAYS, default 10,000). The
 * driver's entry points come from the libcuda cuasync loaded (CUASYNC_LIBCUDA, else libcuda.so.1). */
#define _GNU_SOURCE /* dlopen's RTLD_NOLOAD */
#include "conformance.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

/* sim_add_u32 is a kernel the simulated driver runs by name (tests/fake_driver/sim_kernels.cpp); on a GPU it is this. */
static const char add_source[] =
    "extern \"C\" __global__ void sim_add_u32(unsigned* p, unsigned n, unsigned v) {\n"
    "  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) p[i] += v;\n"
    "}\n";

int load_capture_driver(capture_driver* d) {
  const char* path = getenv("CUASYNC_LIBCUDA");
  void* lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return 0;
  CUresult (*get)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*) =
      (CUresult(*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*))dlsym(lib,
                                                                                                 "cuGetProcAddress_v2");
  if (!get) return 0;
  struct {
    const char* name;
    int version;
    void** fn;
  } wanted[] = {{"cuStreamBeginCapture", 10010, (void**)&d->begin},
                {"cuStreamEndCapture", 10000, (void**)&d->end},
                {"cuStreamIsCapturing", 10000, (void**)&d->is_capturing},
                {"cuGraphInstantiateWithFlags", 11040, (void**)&d->instantiate},
                {"cuGraphLaunch", 10000, (void**)&d->launch},
                {"cuGraphExecDestroy", 10000, (void**)&d->exec_destroy},
                {"cuGraphDestroy", 10000, (void**)&d->destroy},
                {"cuStreamSynchronize", 10000, (void**)&d->synchronize},
                {"cuStreamGetCtx", 9020, (void**)&d->stream_ctx},
                {"cuCtxSetCurrent", 4000, (void**)&d->set_current}};
  for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; ++i) {
    CUdriverProcAddressQueryResult q;
    if (get(wanted[i].name, wanted[i].fn, wanted[i].version, 0, &q) != CUDA_SUCCESS || !*wanted[i].fn) return 0;
  }
  return 1;
}

cuasync_kernel add_u32_kernel(fixture* f) {
  cuasync_compile_args cc;
  memset(&cc, 0, sizeof cc);
  cc.struct_size = CUASYNC_COMPILE_ARGS_SIZE;
  cc.runtime = f->runtime;
  cc.name = "add_u32.cu";
  cc.source = add_source;
  cuasync_kernel_get_args kg;
  memset(&kg, 0, sizeof kg);
  kg.struct_size = CUASYNC_KERNEL_GET_ARGS_SIZE;
  kg.name = "sim_add_u32";
  if (!ok(api->compile(&cc), "compile")) return NULL;
  kg.module = cc.module;
  return ok(api->kernel_get(&kg), "kernel_get") ? kg.kernel : NULL;
}

static CUstream native_of(cuasync_stream s) {
  cuasync_stream_native_args n = {CUASYNC_STREAM_NATIVE_ARGS_SIZE, s, NULL, NULL};
  return ok(api->stream_native(&n), "stream_native") ? (CUstream)n.native : NULL;
}

static const capture_driver* cd;
static CUstream capturing;
/* True when `capturing` is still being captured, and validly: checked after every cuasync call. */
static int still_capturing(void) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return cd->is_capturing(capturing, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

static cuasync_error* add(cuasync_stream s, cuasync_kernel k, void* p, uint32_t v, cuasync_completion c) {
  const uint32_t n = 4;
  const cuasync_kernel_arg args[3] = {{&p, sizeof p}, {&n, sizeof n}, {&v, sizeof v}};
  cuasync_launch_args la = launch_args_of(s, k, args, 3);
  la.block[0] = 4;
  la.completion = c;
  return api->launch(&la);
}

static cuasync_event record(cuasync_stream s) {
  cuasync_event_record_args r = {CUASYNC_EVENT_RECORD_ARGS_SIZE, s, NULL};
  return ok(api->event_record(&r), "event_record in a capture") ? r.event : NULL;
}

static int wait_on(cuasync_event e, cuasync_stream s) {
  cuasync_event_wait_args w = {CUASYNC_EVENT_WAIT_ARGS_SIZE, e, s};
  return ok(api->event_wait(&w), "event_wait in a capture");
}

static cuasync_error* copy(cuasync_stream s, void* dst, const void* src, size_t n, cuasync_completion c) {
  cuasync_copy_args a = {CUASYNC_COPY_ARGS_SIZE, s, dst, src, n, c};
  return api->copy(&a);
}

static cuasync_error* fill(cuasync_stream s, void* dst, uint8_t v, size_t n) {
  cuasync_memset_args m;
  memset(&m, 0, sizeof m);
  m.struct_size = CUASYNC_MEMSET_ARGS_SIZE;
  m.stream = s;
  m.dst = dst;
  m.value = v;
  m.size = n;
  return api->memset(&m);
}

void* allocate_buffer(fixture* f, cuasync_memory_kind kind, size_t n, cuasync_buffer* b) {
  cuasync_buffer_allocate_args ba;
  memset(&ba, 0, sizeof ba);
  ba.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  ba.runtime = f->runtime;
  ba.stream = f->stream;
  ba.kind = kind;
  ba.size = n;
  if (!ok(api->buffer_allocate(&ba), "buffer_allocate")) return NULL;
  *b = ba.buffer;
  return ba.pointer;
}

/* The refusals inside a capture: each names why, and none breaks the capture. */
static void check_refusals(fixture* f, void* dev, cuasync_event captured) {
  uint32_t pageable[4] = {0};
  const cuasync_completion none = {NULL, 0, NULL, NULL};
  cuasync_error* e = copy(f->stream, dev, pageable, sizeof pageable, none);
  CHECK(message_has(e, "pageable") && message_has(e, "pinned") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(still_capturing());
  cuasync_stream_wait_args w = {CUASYNC_STREAM_WAIT_ARGS_SIZE, f->stream, {f->queue, 2, NULL, NULL}};
  e = api->stream_wait(&w);
  CHECK(message_has(e, "being captured") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(still_capturing());
  cuasync_event_query_args q = {CUASYNC_EVENT_QUERY_ARGS_SIZE, captured, 0};
  e = api->event_query(&q);
  CHECK(message_has(e, "captured") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(still_capturing());
}

void run_capture_part(int gpu) {
  capture_driver driver;
  if (!load_capture_driver(&driver)) {
    fprintf(stderr, "capture part: the driver's capture entry points were not found\n");
    ++failures;
    return;
  }
  cd = &driver;
  fixture f;
  if (!open_fixture(&f)) return;
  const cuasync_kernel k = add_u32_kernel(&f);
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = f.runtime;
  cuasync_buffer dev_b = NULL, pinned_b = NULL;
  void* dev = allocate_buffer(&f, CUASYNC_MEMORY_DEVICE, 16, &dev_b);
  uint32_t* pinned = allocate_buffer(&f, CUASYNC_MEMORY_PINNED, 16, &pinned_b);
  if (!k || !ok(api->stream_create(&sc), "stream_create") || !dev || !pinned) {
    close_fixture(&f);
    return;
  }
  cuasync_stream_wait_args settle = {CUASYNC_STREAM_WAIT_ARGS_SIZE, f.stream, {f.queue, 9, NULL, NULL}};
  cuasync_completion_record rec;
  CHECK(ok(api->stream_wait(&settle), "stream_wait") && drain_until(f.queue, f.fd, &rec, 1) == 1);
  capturing = native_of(f.stream);
  CUstream other = native_of(sc.stream);
  const cuasync_completion none = {NULL, 0, NULL, NULL};

  /* Capture: memset 0, +5 on the first stream, hand the buffer to the second (+2), back, then copy out. */
  CHECK(driver.begin(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK(ok(fill(f.stream, dev, 0, 16), "memset in a capture") && still_capturing());
  CHECK(ok(add(f.stream, k, dev, 5, none), "launch in a capture") && still_capturing());
  cuasync_event to_other = record(f.stream);
  CHECK(to_other && still_capturing());
  CHECK(wait_on(to_other, sc.stream) && still_capturing());
  const cuasync_completion awaited = {f.queue, 21, NULL, NULL};  /* reported at once: "captured" */
  CHECK(ok(add(sc.stream, k, dev, 2, awaited), "awaited launch on the joined stream") && still_capturing());
  CHECK(drain_until(f.queue, f.fd, &rec, 1) == 1 && rec.token == 21 && rec.code == CUASYNC_OK && still_capturing());
  cuasync_event back = record(sc.stream);
  CHECK(back && wait_on(back, f.stream) && still_capturing());
  check_refusals(&f, dev, to_other);
  const cuasync_completion copied = {f.queue, 22, NULL, NULL};
  CHECK(ok(copy(f.stream, pinned, dev, 16, copied), "pinned copy in a capture") && still_capturing());
  CHECK(drain_until(f.queue, f.fd, &rec, 1) == 1 && rec.token == 22 && rec.code == CUASYNC_OK && still_capturing());
  CUgraph graph = NULL;
  CHECK(driver.end(capturing, &graph) == CUDA_SUCCESS && graph);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CHECK(driver.is_capturing(other, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_NONE);

  /* Replays: each starts from the memset, so each ends with 7 in every word. Instantiation happens in the current
   * context (the driver refuses it without one, CUDA_ERROR_INVALID_CONTEXT): the caller's thread makes the stream's
   * context current, as a framework's thread has its own. */
  CUgraphExec exec = NULL;
  CUcontext stream_context = NULL;
  CHECK(driver.stream_ctx(capturing, &stream_context) == CUDA_SUCCESS && stream_context);
  CHECK(driver.set_current(stream_context) == CUDA_SUCCESS);
  if (graph && driver.instantiate(&exec, graph, 0) == CUDA_SUCCESS) {
    const char* env = getenv("CUASYNC_CAPTURE_REPLAYS");
    const long replays = env ? atol(env) : gpu ? 10000 : 100;
    long wrong = 0;
    for (long i = 0; i < replays; ++i) {
      memset(pinned, 0xee, 16);
      if (driver.launch(exec, other) != CUDA_SUCCESS || driver.synchronize(other) != CUDA_SUCCESS) {
        ++wrong;
        break;
      }
      for (int w = 0; w < 4; ++w) wrong += pinned[w] != 7;
    }
    CHECK(wrong == 0);
    printf("capture part: %ld graph launches, %ld wrong words\n", replays, wrong);
    /* The same replays through graph_launch (ABI 1.5), each awaited on the queue: its completion comes once, after
     * the replay's work (the words are checked when it arrives), none lost. */
    if (api->struct_size >= CUASYNC_API_SIZE_1_5) {
      long awaited_wrong = 0, completions = 0;
      for (long i = 0; i < replays; ++i) {
        memset(pinned, 0xee, 16);
        cuasync_graph_launch_args gl = {CUASYNC_GRAPH_LAUNCH_ARGS_SIZE, sc.stream, exec, {f.queue, 5000 + (uint64_t)i, NULL, NULL}};
        if (!ok(api->graph_launch(&gl), "graph_launch")) break;
        if (drain_until(f.queue, f.fd, &rec, 1) != 1 || rec.token != 5000 + (uint64_t)i || rec.code != CUASYNC_OK) break;
        ++completions;
        for (int w = 0; w < 4; ++w) awaited_wrong += pinned[w] != 7;
      }
      CHECK(completions == replays && awaited_wrong == 0);
      printf("capture part: %ld replays by graph_launch, %ld completions, %ld wrong words\n", replays, completions,
             awaited_wrong);
      cuasync_graph_launch_args bad = {CUASYNC_GRAPH_LAUNCH_ARGS_SIZE, sc.stream, NULL, {NULL, 0, NULL, NULL}};
      cuasync_error* e = api->graph_launch(&bad);
      CHECK(message_has(e, "graph_exec") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
      /* Without a completion: the replay is enqueued, its place comes back later. */
      bad.graph_exec = exec;
      CHECK(ok(api->graph_launch(&bad), "graph_launch without a completion"));
      CHECK(driver.synchronize(other) == CUDA_SUCCESS);
    }
    driver.exec_destroy(exec);
  } else {
    CHECK(!"cuGraphInstantiateWithFlags");
  }
  if (graph) driver.destroy(graph);

  /* After the capture: the same stream tracks again (a completion comes). */
  cuasync_stream_wait_args after = {CUASYNC_STREAM_WAIT_ARGS_SIZE, f.stream, {f.queue, 10, NULL, NULL}};
  CHECK(ok(api->stream_wait(&after), "stream_wait after the capture") && drain_until(f.queue, f.fd, &rec, 1) == 1 &&
        rec.token == 10 && rec.code == CUASYNC_OK);
  cuasync_event_destroy_args ed = {CUASYNC_EVENT_DESTROY_ARGS_SIZE, to_other};
  CHECK(ok(api->event_destroy(&ed), "event_destroy"));
  ed.event = back;
  CHECK(ok(api->event_destroy(&ed), "event_destroy"));
  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, dev_b};
  CHECK(ok(api->buffer_free(&bf), "buffer_free"));
  bf.buffer = pinned_b;
  CHECK(ok(api->buffer_free(&bf), "buffer_free"));
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
  CHECK(ok(api->stream_destroy(&sd), "stream_destroy"));
  close_fixture(&f);
}
