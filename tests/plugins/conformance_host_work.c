// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's part on any driver (CI: the simulated libcuda; --gpu: the GPU's): what a stream's events
 * do not cover, and the sizes and codes that must be refused. A pageable device-to-host copy ends on the host (cuasync
 * copies the pinned block out after the DMA) and a copy over 256 MiB is staged, enqueuing its chunks over time: a
 * later stream_wait must still complete after them, an event must never be recorded in the middle of them, and a
 * buffer or stream destroyed meanwhile must outlive them. Copies, memsets, buffers and tokens only: no kernel. */
#define _GNU_SOURCE /* nanosleep, dlopen's RTLD_NOLOAD */
#include "conformance.h"

#include <dlfcn.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static cuasync_buffer device_buffer(cuasync_runtime rt, cuasync_stream s, size_t bytes, void** pointer) {
  cuasync_buffer_allocate_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  a.runtime = rt;
  a.stream = s;
  a.kind = CUASYNC_MEMORY_DEVICE;
  a.size = bytes;
  if (!ok(api->buffer_allocate(&a), "buffer_allocate")) return NULL;
  *pointer = a.pointer;
  return a.buffer;
}

static cuasync_error* copy(cuasync_stream s, void* dst, const void* src, size_t bytes, cuasync_queue q, uint64_t token) {
  cuasync_copy_args c;
  memset(&c, 0, sizeof c);
  c.struct_size = CUASYNC_COPY_ARGS_SIZE;
  c.stream = s;
  c.dst = dst;
  c.src = src;
  c.size = bytes;
  c.completion.queue = q;
  c.completion.token = token;
  return api->copy(&c);
}

static cuasync_error* stream_wait(cuasync_stream s, cuasync_queue q, uint64_t token) {
  cuasync_stream_wait_args w = {CUASYNC_STREAM_WAIT_ARGS_SIZE, s, {q, token, NULL, NULL}};
  return api->stream_wait(&w);
}

static void free_buffer(cuasync_buffer b) {
  cuasync_buffer_free_args f = {CUASYNC_BUFFER_FREE_ARGS_SIZE, b};
  ok(api->buffer_free(&f), "buffer_free");
}

/* The position of `token` among the first `n` records (-1: absent), and its code through `code`. */
static int position(const cuasync_completion_record* r, int n, uint64_t token, int* code) {
  for (int i = 0; i < n; ++i)
    if (r[i].token == token) {
      *code = r[i].code;
      return i;
    }
  return -1;
}

/* A pageable device-to-host copy then stream_wait: when the wait completes the host buffer holds every byte, and the
 * copy's own completion came first. `bytes` <= 256 MiB: through a pinned block copied out on cuasync's threads. */
static void test_wait_after_copy_out(cuasync_runtime rt, cuasync_stream s, cuasync_queue q, int fd, size_t bytes) {
  void* dev = NULL;
  cuasync_buffer b = device_buffer(rt, s, bytes, &dev);
  unsigned char* host = calloc(bytes, 1);
  if (!b || !host) {
    CHECK(!"allocations for the copy-out test");
    free(host);
    return;
  }
  cuasync_memset_args m;
  memset(&m, 0, sizeof m);
  m.struct_size = CUASYNC_MEMSET_ARGS_SIZE;
  m.stream = s;
  m.dst = dev;
  m.value = 0xAB;
  m.size = bytes;
  CHECK(ok(api->memset(&m), "memset"));
  CHECK(ok(copy(s, host, dev, bytes, q, 1), "copy to pageable host memory"));
  CHECK(ok(stream_wait(s, q, 2), "stream_wait after the copy"));
  /* Read the buffer as soon as the wait's record is drained, before anything else could finish the copy. */
  cuasync_completion_record r[2];
  int got = 0;
  size_t wrong = bytes;
  while (got < 2) {
    const int n = drain_until(q, fd, r + got, 1);
    if (n == 0) break;
    if (r[got].token == 2) {
      wrong = 0;
      for (size_t i = 0; i < bytes; ++i) wrong += host[i] != 0xAB;
    }
    got += n;
  }
  int code_copy = -1, code_wait = -1;
  const int at_copy = position(r, got, 1, &code_copy), at_wait = position(r, got, 2, &code_wait);
  CHECK(got == 2 && code_copy == 0 && code_wait == 0);
  CHECK(at_copy >= 0 && at_copy < at_wait);  /* the copy's completion first */
  if (wrong) fprintf(stderr, "  %zu of %zu bytes not yet in host memory when stream_wait completed\n", wrong, bytes);
  CHECK(wrong == 0);
  free_buffer(b);
  free(host);
}

enum { staged_bytes = 300 << 20 }; /* over 256 MiB: through the staged copier's ring */

/* Pageable host memory for a staged copy: a pattern that differs in every 4 KiB page. */
static unsigned char* pattern(size_t bytes) {
  unsigned char* p = malloc(bytes);
  if (p)
    for (size_t i = 0; i < bytes; ++i) p[i] = (unsigned char)(i * 7 + (i >> 12));
  return p;
}

/* A staged copy to the device, then stream_wait and an event record at once: the record is refused while the copy
 * holds the stream (an event then would come before the chunks still to be enqueued), or, if the copy let go already,
 * is an event after all of it; the wait completes after the copy. Then the data comes back, staged too, and the wait
 * after that copy completes only once the host holds all of it. */
static void test_staged_copies_and_waits(cuasync_runtime rt, cuasync_stream s, cuasync_queue q, int fd) {
  void* dev = NULL;
  cuasync_buffer b = device_buffer(rt, s, staged_bytes, &dev);
  unsigned char* src = pattern(staged_bytes);
  unsigned char* back = calloc(staged_bytes, 1);
  if (!b || !src || !back) {
    CHECK(!"allocations for the staged copy test");
    free(src);
    free(back);
    return;
  }
  CHECK(ok(copy(s, dev, src, staged_bytes, q, 10), "staged copy to the device"));
  CHECK(ok(stream_wait(s, q, 11), "stream_wait during a staged copy"));
  cuasync_event_record_args er = {CUASYNC_EVENT_RECORD_ARGS_SIZE, s, NULL};
  cuasync_error* e = api->event_record(&er);
  const cuasync_error_code record_code = e ? code_of(e) : CUASYNC_OK;
  CHECK(record_code == CUASYNC_ERROR_BUSY || record_code == CUASYNC_OK);
  cuasync_completion_record r[2];
  const int got = drain_until(q, fd, r, 2);
  int code_copy = -1, code_wait = -1;
  const int at_copy = position(r, got, 10, &code_copy), at_wait = position(r, got, 11, &code_wait);
  CHECK(got == 2 && code_copy == 0 && code_wait == 0);
  CHECK(at_copy >= 0 && at_copy < at_wait);
  if (record_code == CUASYNC_OK) {  /* recorded once the copy let go: after its last chunk, so done with it */
    cuasync_event_query_args eq = {CUASYNC_EVENT_QUERY_ARGS_SIZE, er.event, 0};
    CHECK(ok(api->event_query(&eq), "event_query") && eq.done == 1);
    cuasync_event_destroy_args ed = {CUASYNC_EVENT_DESTROY_ARGS_SIZE, er.event};
    ok(api->event_destroy(&ed), "event_destroy");
  }
  CHECK(ok(copy(s, back, dev, staged_bytes, q, 12), "staged copy back to pageable host memory"));
  CHECK(ok(stream_wait(s, q, 13), "stream_wait during a staged copy back"));
  size_t wrong = staged_bytes;
  int seen = 0;
  cuasync_completion_record r2[2];
  while (seen < 2) {
    const int n = drain_until(q, fd, r2 + seen, 1);
    if (n == 0) break;
    if (r2[seen].token == 13) wrong = (size_t)(memcmp(back, src, staged_bytes) != 0);
    seen += n;
  }
  int c12 = -1, c13 = -1;
  CHECK(seen == 2 && position(r2, seen, 12, &c12) < position(r2, seen, 13, &c13) && c12 == 0 && c13 == 0);
  CHECK(wrong == 0);  /* every byte back when the wait completed */
  free_buffer(b);
  free(src);
  free(back);
}

/* A staged copy whose destination buffer and stream are destroyed right after the call: both outlive the copy (its
 * last chunks are enqueued on the CUstream, into the buffer, after the calls return). Under AddressSanitizer the
 * simulated driver's copies into freed memory would be caught. */
static void test_staged_copy_outlives_its_handles(cuasync_runtime rt, cuasync_queue q, int fd) {
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rt;
  if (!ok(api->stream_create(&sc), "stream_create")) return;
  void* dev = NULL;
  cuasync_buffer b = device_buffer(rt, sc.stream, staged_bytes, &dev);
  unsigned char* src = pattern(staged_bytes);
  if (!b || !src) {
    CHECK(!"allocations for the staged copy lifetime test");
    free(src);
    return;
  }
  CHECK(ok(copy(sc.stream, dev, src, staged_bytes, q, 20), "staged copy to the device"));
  free_buffer(b);
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
  CHECK(ok(api->stream_destroy(&sd), "stream_destroy during a staged copy"));
  cuasync_completion_record r;
  CHECK(drain_until(q, fd, &r, 1) == 1 && r.token == 20 && r.code == 0);
  free(src);
}

/* The simulated driver's count of the calls the calling thread made to an entry point (NULL on another driver). */
typedef long (*calls_on_this_thread_fn)(const char* entry);
/* Pinned allocations on this thread, however the runtime makes its blocks (cuMemHostAlloc, or memory registered with
 * cuMemHostRegister). */
static long pinned_allocations(calls_on_this_thread_fn calls) {
  return calls("cuMemHostAlloc") + calls("cuMemHostRegister");
}
static calls_on_this_thread_fn simulated_calls(void) {
  const char* path = getenv("CUASYNC_LIBCUDA");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  return lib ? (calls_on_this_thread_fn)dlsym(lib, "fake_cuda_calls_on_this_thread") : NULL;
}

/* A stream, a device buffer and two host buffers (a pattern, zeros) of `bytes` for the pageable copy tests. */
struct copy_fixture {
  cuasync_stream stream;
  cuasync_buffer buffer;
  void* dev;
  unsigned char *src, *back;
  size_t bytes;
};
static int open_copy_fixture(struct copy_fixture* f, cuasync_runtime rt, size_t bytes) {
  memset(f, 0, sizeof *f);
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rt;
  if (!ok(api->stream_create(&sc), "stream_create")) return 0;
  f->stream = sc.stream;
  f->bytes = bytes;
  f->buffer = device_buffer(rt, sc.stream, bytes, &f->dev);
  f->src = pattern(bytes);
  f->back = calloc(bytes, 1);
  if (f->buffer && f->src && f->back) return 1;
  CHECK(!"allocations for a pageable copy test");
  free(f->src);
  free(f->back);
  return 0;
}
static void close_copy_fixture(struct copy_fixture* f) {
  free_buffer(f->buffer);
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, f->stream};
  CHECK(ok(api->stream_destroy(&sd), "stream_destroy"));
  free(f->src);
  free(f->back);
}

/* Pageable copies up to 256 MiB never copy on the caller's thread, never allocate pinned memory there and never hold
 * the stream: each is enqueued whole in the call, the stream waiting (cuStreamWaitValue32) for cuasync's copy threads
 * to fill the pinned memory. The first copy of a size goes through the chunks the runtime reserved when it was
 * created while a block of its size is allocated in the background; later ones take that block. Simulated driver
 * only (it counts calls per thread). */
static void test_pageable_copies_off_the_callers_thread(cuasync_runtime rt, cuasync_queue q, int fd) {
  calls_on_this_thread_fn calls = simulated_calls();
  struct copy_fixture f;
  if (!calls || !open_copy_fixture(&f, rt, (3 << 20) + 5)) return;
  const size_t bytes = f.bytes;
  cuasync_stream stream = f.stream;
  void* dev = f.dev;
  unsigned char *src = f.src, *back = f.back;
  const long allocs = pinned_allocations(calls), waits = calls("cuStreamWaitValue32");
  long first_round_allocs = 0, before_last_round = 0;
  int wrong_rounds = 0;
  for (int round = 0; round < 5; ++round) {
    src[round] ^= 0x5a; /* a new pattern every round */
    if (round == 4) before_last_round = pinned_allocations(calls);
    cuasync_completion_record r[2];
    /* Two calls back to back on one stream, the first cold: neither is refused (a stream held by a staged copy
     * refuses later calls as BUSY; a copy of this size never holds it). */
    CHECK(ok(copy(stream, dev, src, bytes, q, 40), "pageable copy to the device"));
    CHECK(ok(copy(stream, back, dev, bytes, q, 41), "pageable copy back, right after it"));
    CHECK(drain_until(q, fd, r, 2) == 2 && r[0].token == 40 && r[0].code == 0 && r[1].token == 41 && r[1].code == 0);
    if (round == 0) {
      first_round_allocs = pinned_allocations(calls) - allocs;
      CHECK(calls("cuStreamWaitValue32") > waits); /* the first copy to the device already went through a block */
    }
    wrong_rounds += memcmp(back, src, bytes) != 0;
  }
  printf("pageable copies: %ld pinned allocations on this thread in the cold round, %ld after it\n",
         first_round_allocs, pinned_allocations(calls) - allocs - first_round_allocs);
  CHECK(wrong_rounds == 0);
  CHECK(first_round_allocs == 0);             /* cold: the reserved chunks, never an allocation here */
  CHECK(pinned_allocations(calls) == allocs);   /* warm: nothing either */
  CHECK(pinned_allocations(calls) == before_last_round);
  close_copy_fixture(&f);
}

/* A copy larger than the reserved chunks (4 of 2 MiB) reuses them in turn, every chunk enqueued in the call: to the
 * device each chunk's DMA waits for its fill (6 waits for 11 MiB + 3). Nothing is copied or allocated on this thread.
 * A later round takes the block allocated for the size in the background (one wait to the device); with whole
 * blocks off (CUASYNC_WHOLE_BLOCK_UP_TO_MIB=0, CTest c_abi_conformance_no_whole_blocks_simulated) every round takes
 * the chunks again. Simulated driver only. */
static void test_cold_copies_reuse_chunks(cuasync_runtime rt, cuasync_queue q, int fd) {
  calls_on_this_thread_fn calls = simulated_calls();
  struct copy_fixture f;
  if (!calls || !open_copy_fixture(&f, rt, (11 << 20) + 3)) return; /* a size class (16 MiB) no other test copies */
  const size_t bytes = f.bytes;
  cuasync_stream stream = f.stream;
  void* dev = f.dev;
  unsigned char *src = f.src, *back = f.back;
  const long allocs = pinned_allocations(calls);
  const char* whole = getenv("CUASYNC_WHOLE_BLOCK_UP_TO_MIB");
  const int whole_blocks = !whole || atoi(whole) > 0;
  long h2d_waits[8] = {0};
  int wrong_rounds = 0, chunk_rounds = 0, warm_round = -1;
  const int rounds = whole_blocks ? 8 : 4;
  for (int round = 0; round < rounds && warm_round < 0; ++round) {
    const long waits = calls("cuStreamWaitValue32");
    src[round * 4099] ^= 0xa5;
    cuasync_completion_record r[2];
    const long dmas = calls("cuMemcpyAsync");
    CHECK(ok(copy(stream, dev, src, bytes, q, 50), "pageable copy to the device"));
    h2d_waits[round] = calls("cuStreamWaitValue32") - waits;
    chunk_rounds += h2d_waits[round] == 6 && calls("cuMemcpyAsync") - dmas == 6; /* the chunks' DMAs, all in the call */
    if (whole_blocks && h2d_waits[round] == 1) warm_round = round;
    /* Back, the route depends on what is idle then (a chunk the background thread made to replace those the copy
     * took, or the ring); runtime/ordered_copy_test.cpp counts its waits. */
    CHECK(ok(copy(stream, back, dev, bytes, q, 51), "pageable copy back, right after it"));
    CHECK(drain_until(q, fd, r, 2) == 2 && r[0].code == 0 && r[1].code == 0);
    wrong_rounds += memcmp(back, src, bytes) != 0;
    struct timespec t = {0, 5 * 1000 * 1000}; /* the background thread's turn */
    nanosleep(&t, NULL);
  }
  printf("copies through chunks: %ld / %ld / %ld / %ld waits to the device in the first rounds (expected 6 each%s)\n",
         h2d_waits[0], h2d_waits[1], h2d_waits[2], h2d_waits[3],
         whole_blocks ? " until a whole block: 1" : "");
  if (whole_blocks) {
    printf("whole blocks on: warm from round %d\n", warm_round);
    CHECK(h2d_waits[0] == 6);
    CHECK(warm_round > 0);
  } else {
    CHECK(chunk_rounds == 4);
  }
  CHECK(wrong_rounds == 0);
  CHECK(pinned_allocations(calls) == allocs);
  close_copy_fixture(&f);
}

/* Sizes from a negative number cast to size_t, and shapes whose extents overflow: refused, never rounded. */
static void test_sizes_refused(cuasync_runtime rt, cuasync_stream s) {
  cuasync_buffer_allocate_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  a.runtime = rt;
  a.kind = CUASYNC_MEMORY_PINNED;
  a.size = SIZE_MAX;
  CHECK(code_of(api->buffer_allocate(&a)) == CUASYNC_ERROR_OUT_OF_MEMORY);
  a.size = ((size_t)1 << 63) + 1;
  CHECK(code_of(api->buffer_allocate(&a)) == CUASYNC_ERROR_OUT_OF_MEMORY);
  a.size = (size_t)1 << 62; /* a size class, past any cap */
  CHECK(code_of(api->buffer_allocate(&a)) == CUASYNC_ERROR_OUT_OF_MEMORY);

  void* dev = NULL;
  cuasync_buffer b = device_buffer(rt, s, 64, &dev);
  if (!b) return;
  cuasync_buffer_export_dlpack_args x;
  memset(&x, 0, sizeof x);
  x.struct_size = CUASYNC_BUFFER_EXPORT_DLPACK_ARGS_SIZE;
  x.buffer = b;
  x.stream = s;
  x.consumer_stream = -1;
  x.dtype_code = 1; /* uint32 */
  x.dtype_bits = 32;
  x.ndim = 2;
  const int64_t negative[2] = {-1, -1}, huge[2] = {(int64_t)1 << 62, 4}, fits[2] = {4, 4}, too_big[2] = {17, 1};
  x.shape = negative;
  cuasync_error* e = api->buffer_export_dlpack(&x);
  CHECK(message_has(e, "negative") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  x.shape = huge;
  e = api->buffer_export_dlpack(&x);
  CHECK(message_has(e, "multiply past") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  x.shape = too_big;
  e = api->buffer_export_dlpack(&x);
  CHECK(message_has(e, "needs 68 bytes") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  x.shape = fits;
  if (ok(api->buffer_export_dlpack(&x), "buffer_export_dlpack")) {
    dl_managed* t = x.managed;
    CHECK(t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 4);
    t->deleter(t);
  }

  int64_t import_shape[2] = {(int64_t)1 << 62, 4};
  dl_managed t;
  memset(&t, 0, sizeof t);
  t.version_major = 1;
  t.data = dev;
  t.device_type = 2; /* kDLCUDA, device 0 */
  t.ndim = 2;
  t.dtype_code = 2;
  t.dtype_bits = 32;
  t.dtype_lanes = 1;
  t.shape = import_shape;
  cuasync_buffer_import_dlpack_args im;
  memset(&im, 0, sizeof im);
  im.struct_size = CUASYNC_BUFFER_IMPORT_DLPACK_ARGS_SIZE;
  im.runtime = rt;
  im.stream = s;
  im.managed = &t;
  e = api->buffer_import_dlpack(&im);
  CHECK(message_has(e, "multiply past") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  free_buffer(b);
}

/* A host token completed with a code that is no cuasync_error_code: refused, and the token stays to be completed. */
static void test_host_token_codes(cuasync_queue q, int fd) {
  cuasync_host_token_create_args c;
  memset(&c, 0, sizeof c);
  c.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
  c.completion.queue = q;
  c.completion.token = 30;
  if (!ok(api->host_token_create(&c), "host_token_create")) return;
  cuasync_host_token_complete_args done = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, c.token, (cuasync_error_code)1234};
  cuasync_error* e = api->host_token_complete(&done);
  CHECK(message_has(e, "not a cuasync_error_code") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  done.code = (cuasync_error_code)-1;
  CHECK(code_of(api->host_token_complete(&done)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  done.code = CUASYNC_ERROR_CANCELLED;
  CHECK(ok(api->host_token_complete(&done), "host_token_complete"));
  cuasync_completion_record r;
  CHECK(drain_until(q, fd, &r, 1) == 1 && r.token == 30 && r.code == CUASYNC_ERROR_CANCELLED);
}

void run_host_work_part(void) {
  fixture f;
  if (!open_fixture(&f)) return;
  test_wait_after_copy_out(f.runtime, f.stream, f.queue, f.fd, 1 << 20);
  test_wait_after_copy_out(f.runtime, f.stream, f.queue, f.fd, 64 << 20);
  test_staged_copies_and_waits(f.runtime, f.stream, f.queue, f.fd);
  test_staged_copy_outlives_its_handles(f.runtime, f.queue, f.fd);
  test_pageable_copies_off_the_callers_thread(f.runtime, f.queue, f.fd);
  test_cold_copies_reuse_chunks(f.runtime, f.queue, f.fd);
  test_sizes_refused(f.runtime, f.stream);
  test_host_token_codes(f.queue, f.fd);
  close_fixture(&f);
}
