// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's ABI 1.3 part: the flight recorder turned on and off, its options checked, its dump in both
 * formats into buffers large and small (no driver needed); and, on a driver, a memset and a stream_wait on a stream
 * named in the dump with the completion's token. */
#define _GNU_SOURCE
#include "conformance.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static cuasync_error* flight_set(uint32_t per_stream, uint32_t stall_ms, int signal) {
  cuasync_flight_recorder_set_args a;
  memset(&a, 0, sizeof a);
  a.struct_size = CUASYNC_FLIGHT_RECORDER_SET_ARGS_SIZE;
  a.per_stream = per_stream;
  a.stall_ms = stall_ms;
  a.signal = signal;
  return api->flight_recorder_set(&a);
}

/* The dump in `format`, malloc'd (NULL when the call failed). */
static char* flight_dump(uint32_t format, const char* reason) {
  cuasync_flight_recorder_dump_args d;
  memset(&d, 0, sizeof d);
  d.struct_size = CUASYNC_FLIGHT_RECORDER_DUMP_ARGS_SIZE;
  d.reason = reason;
  d.format = format;
  if (!ok(api->flight_recorder_dump(&d), "flight_recorder_dump (size)")) return NULL;
  const size_t size = d.size + 4096; /* room for what is recorded meanwhile */
  char* text = malloc(size);
  if (!text) return NULL;
  d.buffer = text;
  d.capacity = size;
  if (!ok(api->flight_recorder_dump(&d), "flight_recorder_dump")) {
    free(text);
    return NULL;
  }
  CHECK(d.size < size && text[d.size] == '\0' && strlen(text) == d.size);
  return text;
}

static void test_flight_without_driver(void) {
  CHECK(api->abi_minor >= 3);
  CHECK(api->struct_size >= CUASYNC_API_SIZE_1_3 && CUASYNC_API_SIZE_1_3 > CUASYNC_API_SIZE_1_2);
  if (api->struct_size < CUASYNC_API_SIZE_1_3) return;
  CHECK(code_of(flight_set(4, 0, 0)) == CUASYNC_ERROR_INVALID_ARGUMENT);      /* too short a ring */
  CHECK(code_of(flight_set(16, 0, 100000)) == CUASYNC_ERROR_INVALID_ARGUMENT); /* not a signal */
  CHECK(code_of(api->flight_recorder_set(NULL)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(ok(flight_set(16, 0, 0), "flight_recorder_set"));
  char* text = flight_dump(CUASYNC_FLIGHT_TEXT, "conformance check");
  CHECK(text && strstr(text, "cuasync flight recorder (pid ") == text && strstr(text, "conformance check"));
  free(text);
  char* json = flight_dump(CUASYNC_FLIGHT_CHROME_JSON, NULL);
  CHECK(json && strncmp(json, "{\"traceEvents\":[", 16) == 0 && strstr(json, "asked for by the caller"));
  free(json);
  /* A buffer too small: its first bytes and a NUL, and the whole size. */
  char small[8];
  cuasync_flight_recorder_dump_args d;
  memset(&d, 0, sizeof d);
  d.struct_size = CUASYNC_FLIGHT_RECORDER_DUMP_ARGS_SIZE;
  d.buffer = small;
  d.capacity = sizeof small;
  CHECK(ok(api->flight_recorder_dump(&d), "flight_recorder_dump (small buffer)"));
  CHECK(d.size > sizeof small && small[7] == '\0' && strncmp(small, "cuasync", 7) == 0);
  d.format = 7;
  CHECK(code_of(api->flight_recorder_dump(&d)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  d.format = CUASYNC_FLIGHT_TEXT;
  d.buffer = NULL; /* a capacity without a buffer */
  CHECK(code_of(api->flight_recorder_dump(&d)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(ok(flight_set(0, 0, 0), "flight_recorder_set (off)"));
}

/* On a driver: a memset and a stream_wait, recorded with the wait's token, then seen done. */
static void test_flight_on_a_stream(void) {
  if (api->struct_size < CUASYNC_API_SIZE_1_3) return;
  CHECK(ok(flight_set(64, 0, 0), "flight_recorder_set"));
  fixture f;
  if (!open_fixture(&f)) return;
  cuasync_buffer_allocate_args ba;
  memset(&ba, 0, sizeof ba);
  ba.struct_size = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
  ba.runtime = f.runtime;
  ba.stream = f.stream;
  ba.size = 4096;
  if (ok(api->buffer_allocate(&ba), "buffer_allocate")) {
    cuasync_memset_args m;
    memset(&m, 0, sizeof m);
    m.struct_size = CUASYNC_MEMSET_ARGS_SIZE;
    m.stream = f.stream;
    m.dst = ba.pointer;
    m.value = 7;
    m.size = 4096;
    CHECK(ok(api->memset(&m), "memset"));
    cuasync_stream_wait_args w = {CUASYNC_STREAM_WAIT_ARGS_SIZE, f.stream, {f.queue, 0xF11, NULL, NULL}};
    CHECK(ok(api->stream_wait(&w), "stream_wait"));
    cuasync_completion_record r;
    CHECK(drain_until(f.queue, f.fd, &r, 1) == 1 && r.token == 0xF11 && r.code == CUASYNC_OK);
    char* text = flight_dump(CUASYNC_FLIGHT_TEXT, "after a memset");
    CHECK(text != NULL);
    if (text) {
      CHECK(strstr(text, "cuMemsetD8Async memset, 4096 bytes") != NULL);
      CHECK(strstr(text, "on device 0") != NULL);
      CHECK(strstr(text, "awaited by C ABI completion: token 0xf11") != NULL);
      CHECK(strstr(text, "done") != NULL);
      if (!strstr(text, "cuMemsetD8Async")) fprintf(stderr, "%s\n", text);
      free(text);
    }
    cuasync_buffer_free_args bf = {CUASYNC_BUFFER_FREE_ARGS_SIZE, ba.buffer};
    CHECK(ok(api->buffer_free(&bf), "buffer_free"));
  }
  close_fixture(&f);
  CHECK(ok(flight_set(0, 0, 0), "flight_recorder_set (off)"));
}

void run_abi_1_3_part(int with_driver) {
  test_flight_without_driver();
  if (with_driver) test_flight_on_a_stream();
}
