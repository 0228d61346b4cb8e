// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's part on the simulated driver about admission places of operations made without a
 * completion (memsets here; launches take the same path but need a kernel): libcuasync gives their places back in
 * batches, one event per batch instead of one per operation. Admission must still bound what is in flight: behind
 * long work a stream takes 64 places (the default bound) and the next operation is refused with CUASYNC_ERROR_BUSY,
 * enqueueing nothing; once the work is done its places come back. The simulated driver's call counts (its
 * fake_cuda_report, found in the library CUASYNC_LIBCUDA names) show the events recorded. */
#define _GNU_SOURCE /* nanosleep, dlopen's RTLD_NOLOAD */
#include "conformance.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A memset completing to queue `q` with `token` (q NULL: without a completion). */
static cuasync_error* memset_to(cuasync_stream s, void* dst, size_t bytes, cuasync_queue q, uint64_t token) {
  cuasync_memset_args m;
  memset(&m, 0, sizeof m);
  m.struct_size = CUASYNC_MEMSET_ARGS_SIZE;
  m.stream = s;
  m.dst = dst;
  m.value = 7;
  m.size = bytes;
  m.completion.queue = q;
  m.completion.token = token;
  return api->memset(&m);
}

static cuasync_error* memset_unreported(cuasync_stream s, void* dst, size_t bytes) {
  return memset_to(s, dst, bytes, NULL, 0);
}

/* The simulated driver's count of `entry` calls made while its phase was 1 (-1: not the simulated driver). */
static long calls_of(const char* entry) {
  const char* path = getenv("CUASYNC_LIBCUDA");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  if (!lib) return -1;
  int (*report)(char*, int) = (int (*)(char*, int))dlsym(lib, "fake_cuda_report");
  if (!report) return -1;
  const int n = report(NULL, 0);
  char* text = malloc((size_t)n);
  report(text, n);
  char needle[96];
  snprintf(needle, sizeof needle, " %s=", entry);
  const char* at = strstr(text, needle);
  const long count = at ? strtol(at + strlen(needle), NULL, 10) : 0;
  free(text);
  return count;
}

/* The simulated driver's count of `entry` calls made by this thread (-1: not the simulated driver). A batch's event
 * is recorded by the call that fills it, on the caller's thread; a process-wide count also sees the background work of
 * earlier parts (a staged copy's last chunks, under ThreadSanitizer's pace). */
static long calls_here(const char* entry) {
  const char* path = getenv("CUASYNC_LIBCUDA");
  void* lib = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
  long (*calls)(const char*) = lib ? (long (*)(const char*))dlsym(lib, "fake_cuda_calls_on_this_thread") : NULL;
  return calls ? calls(entry) : -1;
}

static void set_phase(int phase) {
  void* lib = dlopen(getenv("CUASYNC_LIBCUDA"), RTLD_NOW | RTLD_NOLOAD);
  void (*set)(int) = lib ? (void (*)(int))dlsym(lib, "fake_cuda_set_phase") : NULL;
  if (set) set(phase);
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static int wait_for_stream(cuasync_stream s, cuasync_queue q, int fd, uint64_t token) {
  cuasync_stream_wait_args w = {CUASYNC_STREAM_WAIT_ARGS_SIZE, s, {q, token, NULL, NULL}};
  if (!ok(api->stream_wait(&w), "stream_wait")) return 0;
  cuasync_completion_record r;
  return drain_until(q, fd, &r, 1) == 1 && r.token == token && r.code == CUASYNC_OK;
}

static cuasync_stream new_stream(cuasync_runtime rt) {
  cuasync_stream_create_args sc;
  memset(&sc, 0, sizeof sc);
  sc.struct_size = CUASYNC_STREAM_CREATE_ARGS_SIZE;
  sc.runtime = rt;
  return ok(api->stream_create(&sc), "stream_create") ? sc.stream : NULL;
}

static void destroy_stream(cuasync_stream s) {
  cuasync_stream_destroy_args sd = {CUASYNC_STREAM_DESTROY_ARGS_SIZE, s};
  CHECK(ok(api->stream_destroy(&sd), "stream_destroy"));
}

/* Memsets on `s` admitted until the first CUASYNC_ERROR_BUSY (at most `most`). */
static int admitted_until_busy(cuasync_stream s, void* dst, int most) {
  int n = 0;
  cuasync_error_code code = CUASYNC_OK;
  while (n < most && (code = code_of(memset_unreported(s, dst, 4096))) == CUASYNC_OK) ++n;
  CHECK(code == CUASYNC_ERROR_BUSY);
  return n;
}

/* A stream's admission credit (up to 16 places taken at once for operations without a completion) gives its unused
 * places back before a tracked operation on the stream, and its used ones with their event at a stream_wait: with 64
 * places in the context, a stream that made one memset and then one with a completion keeps one place, so another
 * stream behind long work gets the other 63 (it would get 48 with the first stream's 15 unused places kept). */
static void check_credit_return(const fixture* f, void* dst, size_t big) {
  cuasync_admission_limits_args saved = {CUASYNC_ADMISSION_LIMITS_ARGS_SIZE, f->runtime, 0, 0};
  if (!ok(api->runtime_admission_get(&saved), "runtime_admission_get")) return;
  cuasync_admission_limits_args l = {CUASYNC_ADMISSION_LIMITS_ARGS_SIZE, f->runtime, 64, 64};
  if (!ok(api->runtime_admission_set(&l), "runtime_admission_set")) return;
  cuasync_stream a = new_stream(f->runtime), b = new_stream(f->runtime);
  if (!a || !b) return;
  CHECK(ok(memset_unreported(a, dst, 4096), "memset"));
  CHECK(ok(memset_to(a, dst, 4096, f->queue, 40), "memset with a completion"));
  cuasync_completion_record r;
  CHECK(drain_until(f->queue, f->fd, &r, 1) == 1 && r.token == 40);
  for (int i = 0; i < 3; ++i) CHECK(ok(memset_unreported(b, dst, big), "memset"));
  const int behind = admitted_until_busy(b, dst, 200);
  printf("conformance: 64 places, one kept by a stream's used credit: %d memsets admitted behind long work (expected "
         "60)\n", behind);
  CHECK(behind == 60);
  /* a's stream_wait gives its last place back (with its event): b, refused until now, is admitted again. */
  CHECK(wait_for_stream(a, f->queue, f->fd, 41));
  int more = 0;
  for (int tries = 0; more == 0 && tries < 5000; ++tries) {
    if (code_of(memset_unreported(b, dst, 4096)) == CUASYNC_OK) ++more;
    else sleep_ms(1);
  }
  CHECK(more == 1); /* (b's long work may be done by now too: what follows is not counted) */
  CHECK(wait_for_stream(b, f->queue, f->fd, 42));
  destroy_stream(a);
  destroy_stream(b);
  CHECK(ok(api->runtime_admission_set(&saved), "runtime_admission_set"));
}

void run_batches_part(void) {
  if (calls_of("cuEventRecord") < 0) return; /* not the simulated driver: nothing to count */
  fixture f;
  if (!open_fixture(&f)) return;
  const size_t big = (size_t)256 << 20;
  cuasync_buffer_allocate_args ba;
  memset(&ba, 0, sizeof ba);
  ba.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  ba.runtime = f.runtime;
  ba.stream = f.stream;
  ba.kind = CUASYNC_MEMORY_DEVICE;
  ba.size = big;
  if (!ok(api->buffer_allocate(&ba), "buffer_allocate")) return;

  /* One event per batch of 16: 160 memsets then a stream_wait record 11 events (and one per refusal at most), where
   * one each recorded 161. */
  set_phase(1);
  const long before = calls_here("cuEventRecord");
  int refused = 0;
  for (int i = 0; i < 160; ++i) {
    /* An idle stream's places come back as the poller sees the batches' events: a BUSY here only means it lags. */
    cuasync_error_code code = code_of(memset_unreported(f.stream, ba.pointer, 4096));
    for (int tries = 0; code == CUASYNC_ERROR_BUSY && tries < 5000; ++tries) {
      ++refused;
      sleep_ms(1);
      code = code_of(memset_unreported(f.stream, ba.pointer, 4096));
    }
    CHECK(code == CUASYNC_OK);
  }
  CHECK(wait_for_stream(f.stream, f.queue, f.fd, 1));
  const long events = calls_here("cuEventRecord") - before;
  set_phase(2);
  printf("conformance: 160 memsets without a completion and a stream_wait recorded %ld events (%d BUSY retries)\n",
         events, refused);
  /* 10 batches and the stream_wait's; each refusal (the poller lagging behind the simulated device) may record the
   * partial batch's event before it polls: one event per memset, as before, would be 161. */
  CHECK(events <= 160 / 16 + 1 + refused);
  CHECK(refused < 40);

  /* The bound, on a stream of its own (the first one's last places may still be on their way back): behind three
   * long memsets (their own places), 61 more fit in the stream's 64; the next is refused. */
  cuasync_stream s2 = new_stream(f.runtime);
  if (!s2) return;
  for (int i = 0; i < 3; ++i) CHECK(ok(memset_unreported(s2, ba.pointer, big), "memset"));
  const int admitted = admitted_until_busy(s2, ba.pointer, 200);
  printf("conformance: behind long work, %d memsets admitted before CUASYNC_ERROR_BUSY (expected 61)\n", admitted);
  CHECK(admitted == 61);
  cuasync_error_code code = CUASYNC_OK;
  /* Once the work is done, the places come back: 64 more are admitted (retrying while the poller catches up). */
  CHECK(wait_for_stream(s2, f.queue, f.fd, 2));
  int again = 0;
  for (int tries = 0; again < 64 && tries < 5000;) {
    code = code_of(memset_unreported(s2, ba.pointer, 4096));
    if (code == CUASYNC_OK) {
      ++again;
      continue;
    }
    CHECK(code == CUASYNC_ERROR_BUSY);
    if (code != CUASYNC_ERROR_BUSY) break;
    ++tries;
    sleep_ms(1);
  }
  CHECK(again == 64);
  CHECK(wait_for_stream(s2, f.queue, f.fd, 3));

  destroy_stream(s2);
  check_credit_return(&f, ba.pointer, big);

  cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, ba.buffer};
  CHECK(ok(api->buffer_free(&bf), "buffer_free"));
  close_fixture(&f);
}
