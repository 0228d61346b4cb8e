/* The conformance suite's part on any driver (CI: the simulated libcuda; --gpu: the GPU's): what a stream's events
 * do not cover, and the sizes and codes that must be refused. A pageable device-to-host copy ends on the host (cuasync
 * copies the pinned block out after the DMA) and a copy over 256 MiB is staged, enqueuing its chunks over time: a
 * later stream_wait must still complete after them, an event must never be recorded in the middle of them, and a
 * buffer or stream destroyed meanwhile must outlive them. Copies, memsets, buffers and tokens only: no kernel. */
#include "conformance.h"

#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
  cuasync_runtime_create_args rc;
  memset(&rc, 0, sizeof rc);
  rc.struct_size = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
  if (!ok(api->runtime_create(&rc), "runtime_create")) return;
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rc.runtime;
  if (!ok(api->stream_create(&sc), "stream_create")) return;
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  if (!ok(api->queue_create(&qc), "queue_create")) return;
  cuasync_queue_fd_args qf = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(ok(api->queue_fd(&qf), "queue_fd"));

  test_wait_after_copy_out(rc.runtime, sc.stream, qc.queue, qf.fd, 1 << 20);
  test_wait_after_copy_out(rc.runtime, sc.stream, qc.queue, qf.fd, 64 << 20);
  test_staged_copies_and_waits(rc.runtime, sc.stream, qc.queue, qf.fd);
  test_staged_copy_outlives_its_handles(rc.runtime, qc.queue, qf.fd);
  test_sizes_refused(rc.runtime, sc.stream);
  test_host_token_codes(qc.queue, qf.fd);

  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, sc.stream};
  CHECK(ok(api->stream_destroy(&sd), "stream_destroy"));
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  CHECK(ok(api->queue_destroy(&qd), "queue_destroy"));
  cuasync_runtime_destroy_args rd = {CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, rc.runtime};
  CHECK(ok(api->runtime_destroy(&rd), "runtime_destroy"));
}
