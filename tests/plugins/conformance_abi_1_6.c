// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* ABI 1.6: replay anchors. The caller captures a kernel (+1 to four pinned words) and a replay_anchor_mark with its own
 * cuStreamBeginCapture (global mode: the mark must not invalidate it), launches the graph itself, and awaits each
 * replay with replay_anchor_wait: one completion per replay, with the words already counted (never early), the
 * generation it names; several replays launched before their waits complete every waiter, none lost; a wait for a
 * generation already reached completes at once; a mark outside a capture is refused; a destroyed anchor is stale. On
 * the simulated driver (100 replays) and on a GPU (--gpu: CUASYNC_CAPTURE_REPLAYS, default 10,000). */
#include "conformance.h"

#include <stdlib.h>
#include <string.h>

static cuasync_error* wait_for(cuasync_replay_anchor a, uint64_t generation, cuasync_queue q, uint64_t token,
                               uint64_t* awaited) {
  cuasync_replay_anchor_wait_args w;
  memset(&w, 0, sizeof w);
  w.struct_size = CUASYNC_REPLAY_ANCHOR_WAIT_ARGS_SIZE;
  w.anchor = a;
  w.generation = generation;
  w.completion.queue = q;
  w.completion.token = token;
  cuasync_error* e = api->replay_anchor_wait(&w);
  if (awaited) *awaited = w.generation;
  return e;
}

static uint64_t reached(cuasync_replay_anchor a) {
  cuasync_replay_anchor_wait_args w;
  memset(&w, 0, sizeof w);
  w.struct_size = CUASYNC_REPLAY_ANCHOR_WAIT_ARGS_SIZE;
  w.anchor = a;
  return ok(api->replay_anchor_wait(&w), "replay_anchor_wait without a queue") ? w.reached : (uint64_t)-1;
}

/* Each replay awaited after its launch: its completion names its token, and the words were counted before it. */
static void await_each(const capture_driver* d, CUgraphExec exec, CUstream s, cuasync_replay_anchor a, fixture* f,
                       const uint32_t* words, long replays) {
  long wrong = 0, completions = 0;
  cuasync_completion_record rec;
  for (long i = 1; i <= replays; ++i) {
    uint64_t awaited = 0;
    if (d->launch(exec, s) != CUDA_SUCCESS || !ok(wait_for(a, (uint64_t)i, f->queue, 7000 + (uint64_t)i, &awaited),
                                                   "replay_anchor_wait"))
      break;
    wrong += awaited != (uint64_t)i;
    if (drain_until(f->queue, f->fd, &rec, 1) != 1 || rec.token != 7000 + (uint64_t)i || rec.code != CUASYNC_OK) {
      fprintf(stderr, "abi 1.6 part: replay %ld: record %llu, code %d (cuda %d), awaited %llu\n", i,
              (unsigned long long)rec.token, (int)rec.code, (int)rec.cuda_result, (unsigned long long)awaited);
      break;
    }
    ++completions;
    for (int w = 0; w < 4; ++w) wrong += words[w] != (uint32_t)i;  /* counted before the mark: never early */
  }
  CHECK(completions == replays && wrong == 0);
  printf("abi 1.6 part: %ld replays awaited through the anchor, %ld completions, %ld wrong\n", replays, completions,
         wrong);
}

/* Replays launched first, then a wait for each generation and one for the next (generation 0): all but the last
 * complete, each once. */
static void none_lost(const capture_driver* d, CUgraphExec exec, CUstream s, cuasync_replay_anchor a, fixture* f) {
  enum { burst = 20 };
  const uint64_t base = reached(a);
  for (int i = 0; i < burst; ++i) CHECK(d->launch(exec, s) == CUDA_SUCCESS);
  CHECK(d->synchronize(s) == CUDA_SUCCESS);
  CHECK(reached(a) == base + burst);
  for (int i = 1; i <= burst; ++i) CHECK(ok(wait_for(a, base + (uint64_t)i, f->queue, 8000 + (uint64_t)i, NULL), "wait"));
  uint64_t next = 0;  /* generation 0: the next one */
  CHECK(ok(wait_for(a, 0, f->queue, 8999, &next), "wait for the next") && next == base + burst + 1);
  cuasync_completion_record rec[burst + 1];
  int seen[burst + 1] = {0}, got = drain_until(f->queue, f->fd, rec, burst);
  CHECK(got == burst);
  for (int i = 0; i < got; ++i) {
    CHECK(rec[i].code == CUASYNC_OK && rec[i].token > 8000 && rec[i].token <= 8000 + burst);
    if (rec[i].token > 8000 && rec[i].token <= 8000 + burst) ++seen[rec[i].token - 8000];
  }
  for (int i = 1; i <= burst; ++i) CHECK(seen[i] == 1);
  CHECK(d->launch(exec, s) == CUDA_SUCCESS);  /* the next replay completes the last wait */
  CHECK(drain_until(f->queue, f->fd, rec, 1) == 1 && rec[0].token == 8999 && rec[0].code == CUASYNC_OK);
}

void run_abi_1_6_part(int gpu) {
  if (api->struct_size < CUASYNC_API_SIZE_1_6) return;
  CHECK(api->abi_minor >= 6);
  capture_driver d;
  if (!load_capture_driver(&d)) {
    fprintf(stderr, "abi 1.6 part: the driver's capture entry points were not found\n");
    ++failures;
    return;
  }
  fixture f;
  if (!open_fixture(&f)) return;
  const cuasync_kernel k = add_u32_kernel(&f);
  cuasync_buffer words_b = NULL;
  uint32_t* words = allocate_buffer(&f, CUASYNC_MEMORY_PINNED, 16, &words_b);
  cuasync_stream_native_args n = {CUASYNC_STREAM_NATIVE_ARGS_SIZE, f.stream, NULL, NULL};
  if (!k || !words || !ok(api->stream_native(&n), "stream_native")) {
    close_fixture(&f);
    return;
  }
  memset(words, 0, 16);
  CUstream s = (CUstream)n.native;

  cuasync_replay_anchor_mark_args m = {CUASYNC_REPLAY_ANCHOR_MARK_ARGS_SIZE, f.stream, 0, NULL};
  cuasync_error* e = api->replay_anchor_mark(&m);  /* not being captured */
  CHECK(message_has(e, "not being captured") && code_of(e) == CUASYNC_ERROR_CUDA && m.anchor == NULL);

  CHECK(d.begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  void* p = words;
  const uint32_t count = 4, one = 1;
  const cuasync_kernel_arg args[3] = {{&p, sizeof p}, {&count, sizeof count}, {&one, sizeof one}};
  cuasync_launch_args la = launch_args_of(f.stream, k, args, 3);
  la.block[0] = 4;
  CHECK(ok(api->launch(&la), "launch in a capture"));
  CHECK(ok(api->replay_anchor_mark(&m), "replay_anchor_mark in a capture") && m.anchor);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  CHECK(d.is_capturing(s, &st) == CUDA_SUCCESS && st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  CHECK(d.end(s, &graph) == CUDA_SUCCESS && graph);
  CUcontext stream_context = NULL;  /* instantiated in the current context, as the driver requires */
  CHECK(d.stream_ctx(s, &stream_context) == CUDA_SUCCESS && d.set_current(stream_context) == CUDA_SUCCESS);
  if (graph && d.instantiate(&exec, graph, 0) == CUDA_SUCCESS && m.anchor) {
    CHECK(reached(m.anchor) == 0);
    const char* env = getenv("CUASYNC_CAPTURE_REPLAYS");
    await_each(&d, exec, s, m.anchor, &f, words, env ? atol(env) : gpu ? 10000 : 100);
    none_lost(&d, exec, s, m.anchor, &f);
    cuasync_completion_record rec;  /* a generation reached long ago: at once */
    CHECK(ok(wait_for(m.anchor, 1, f.queue, 9001, NULL), "wait for generation 1") &&
          drain_until(f.queue, f.fd, &rec, 1) == 1 && rec.token == 9001 && rec.code == CUASYNC_OK);
    d.exec_destroy(exec);
  } else {
    CHECK(!"capture, instantiate and mark");
  }
  if (graph) d.destroy(graph);
  cuasync_replay_anchor_destroy_args ad = {CUASYNC_REPLAY_ANCHOR_DESTROY_ARGS_SIZE, m.anchor};
  CHECK(ok(api->replay_anchor_destroy(&ad), "replay_anchor_destroy"));
  CHECK(code_of(wait_for(m.anchor, 1, NULL, 0, NULL)) == CUASYNC_ERROR_STALE_HANDLE);
  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, words_b};
  CHECK(ok(api->buffer_free(&bf), "buffer_free"));
  close_fixture(&f);
}
