// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* ABI 1.7: queue_poll, queue_drain after one look for finished work on the caller's thread. The table has it; its
 * refusals are queue_drain's, named as its own; a host token completed on this thread is taken by polling alone
 * (the fd never asked for, never waited on); on a driver, a memset's completion is taken by polling alone, and the
 * fd protocol still holds afterwards (a drain that returns fewer than asked for leaves the fd unreadable). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, poll: the suite is C11 without extensions */
#include "conformance.h"

#include <poll.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* queue_poll until one record came (at most 30 s); 1 and the record, or 0. */
static int poll_one(cuasync_queue q, cuasync_completion_record* out) {
  cuasync_queue_drain_args d;
  memset(&d, 0, sizeof d);
  d.struct_size = CUASYNC_QUEUE_DRAIN_ARGS_SIZE;
  d.queue = q;
  d.records = out;
  d.capacity = 1;
  for (const double until = now_s() + 30; now_s() < until;) {
    if (!ok(api->queue_poll(&d), "queue_poll")) return 0;
    if (d.count == 1) return 1;
  }
  return 0;
}

/* Readable within `ms` (0: now). A delivery on another thread writes the fd just after queueing its record, so a
 * record can be taken a moment before the fd says so. */
static int fd_readable_within(int fd, int ms) {
  struct pollfd p = {fd, POLLIN, 0};
  return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static int fd_readable(int fd) { return fd_readable_within(fd, 0); }

static cuasync_queue make_queue(uint32_t flags) {
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, flags, NULL};
  return ok(api->queue_create(&qc), "queue_create") ? qc.queue : NULL;
}

static void destroy_queue(cuasync_queue q) {
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, q};
  CHECK(ok(api->queue_destroy(&qd), "queue_destroy"));
}

static void test_refusals(void) {
  cuasync_completion_record r;
  cuasync_queue q = make_queue(CUASYNC_QUEUE_FD);
  if (!q) return;
  cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, q, NULL, 1, 0};
  cuasync_error* e = api->queue_poll(&d);
  CHECK(message_has(e, "queue_poll: records is NULL") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  d.capacity = 0; /* nothing asked for: a look, then nothing taken */
  CHECK(ok(api->queue_poll(&d), "queue_poll with capacity 0") && d.count == 0);
  destroy_queue(q);
  d.records = &r;
  d.capacity = 1;
  CHECK(code_of(api->queue_poll(&d)) == CUASYNC_ERROR_STALE_HANDLE);
  cuasync_queue callbacks_only = make_queue(CUASYNC_QUEUE_CALLBACKS);
  if (!callbacks_only) return;
  d.queue = callbacks_only;
  e = api->queue_poll(&d);
  CHECK(message_has(e, "queue_poll: the queue was created without CUASYNC_QUEUE_FD") &&
        code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  destroy_queue(callbacks_only);
}

static void test_host_token(void) {
  cuasync_queue q = make_queue(CUASYNC_QUEUE_FD);
  if (!q) return;
  cuasync_host_token_create_args c;
  memset(&c, 0, sizeof c);
  c.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
  c.completion.queue = q;
  c.completion.token = 1701;
  if (ok(api->host_token_create(&c), "host_token_create")) {
    cuasync_host_token_complete_args done = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, c.token, CUASYNC_OK};
    CHECK(ok(api->host_token_complete(&done), "host_token_complete"));
    cuasync_completion_record r;
    CHECK(poll_one(q, &r) == 1 && r.token == 1701 && r.code == CUASYNC_OK);
  }
  destroy_queue(q);
}

/* Records the poll's own pass queued and its drain left (three host tokens, taken one at a time): the fd is readable
 * while any is queued, whichever thread delivered them, and unreadable once a poll returned fewer than asked for. */
static void test_left_queued(void) {
  cuasync_queue_fd_args fa;
  cuasync_queue q = make_queue(CUASYNC_QUEUE_FD);
  if (!q) return;
  memset(&fa, 0, sizeof fa);
  fa.struct_size = CUASYNC_QUEUE_FD_ARGS_SIZE;
  fa.queue = q;
  if (ok(api->queue_fd(&fa), "queue_fd")) {
    int made = 0;
    for (uint64_t t = 0; t < 3; ++t) {
      cuasync_host_token_create_args c;
      memset(&c, 0, sizeof c);
      c.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
      c.completion.queue = q;
      c.completion.token = 2100 + t;
      if (!ok(api->host_token_create(&c), "host_token_create")) break;
      cuasync_host_token_complete_args done = {CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, c.token, CUASYNC_OK};
      if (!ok(api->host_token_complete(&done), "host_token_complete")) break;
      ++made;
    }
    CHECK(made == 3);
    cuasync_completion_record r;
    unsigned seen = 0; /* host tokens complete in any order (a FIFO each): a bit per token */
    for (int t = 0; t < 3 && poll_one(q, &r) == 1 && r.token >= 2100 && r.token < 2103; ++t) {
      seen |= 1u << (r.token - 2100);
      if (t < 2) CHECK(fd_readable_within(fa.fd, 5000)); /* more queued: the fd says so */
    }
    CHECK(seen == 7u);
    cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, q, &r, 1, 0};
    CHECK(ok(api->queue_poll(&d), "queue_poll") && d.count == 0 && !fd_readable(fa.fd));
  }
  destroy_queue(q);
}

/* A memset's completion taken by polling, on a driver; then the fd protocol: readable once a record is queued, and
 * unreadable after a poll that returned fewer records than asked for. */
static void test_memset(void) {
  fixture f;
  if (!open_fixture(&f)) return;
  cuasync_buffer b = NULL;
  void* dev = allocate_buffer(&f, CUASYNC_MEMORY_DEVICE, 1 << 16, &b);
  if (dev) {
    cuasync_completion_record r;
    long polled = 0;
    for (int i = 0; i < 200; ++i) {
      cuasync_memset_args m = {CUASYNC_MEMSET_ARGS_SIZE, f.stream, dev, (uint8_t)i, 1 << 16, {f.queue, 900 + (uint64_t)i,
                                                                                           NULL, NULL}};
      if (!ok(api->memset(&m), "memset")) break;
      if (poll_one(f.queue, &r) != 1 || r.token != 900 + (uint64_t)i || r.code != CUASYNC_OK) break;
      ++polled;
    }
    CHECK(polled == 200);
    printf("abi 1.7 part: %ld memset completions taken by queue_poll alone\n", polled);
    cuasync_memset_args m = {CUASYNC_MEMSET_ARGS_SIZE, f.stream, dev, 1, 1 << 16, {f.queue, 1999, NULL, NULL}};
    if (ok(api->memset(&m), "memset")) {
      CHECK(drain_until(f.queue, f.fd, &r, 1) == 1 && r.token == 1999);  /* the fd woke for it */
      cuasync_queue_drain_args d = {CUASYNC_QUEUE_DRAIN_ARGS_SIZE, f.queue, &r, 1, 0};
      CHECK(ok(api->queue_poll(&d), "queue_poll") && d.count == 0 && !fd_readable(f.fd));
    }
    cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, b};
    CHECK(ok(api->buffer_free(&bf), "buffer_free"));
  }
  close_fixture(&f);
}

void run_abi_1_7_part(int with_driver) {
  CHECK(api->abi_minor >= 7 && api->struct_size >= CUASYNC_API_SIZE_1_7 && api->queue_poll != NULL);
  if (api->struct_size < CUASYNC_API_SIZE_1_7) return;
  test_refusals();
  test_host_token();
  test_left_queued();
  if (with_driver) test_memset();
}
