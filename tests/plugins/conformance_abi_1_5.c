// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* ABI 1.5: compile_image_start / compile_image_finish, compiles that complete through a queue like GPU work. No
 * driver needed (NVRTC only). Several compiles in flight at once, each finished after its completion arrived; the
 * images equal compile_image's; a compile error reaches the completion's code and finish's error; argument errors
 * are the start call's own; a job is finished once. */
#include "conformance.h"

#include <stdlib.h>
#include <string.h>

enum { jobs = 6 };

static void start_args(cuasync_compile_image_args* c, char* source, size_t cap, int i, const char* const* expr) {
  snprintf(source, cap,
           "template <class T> __global__ void scale%d(T* x, T a, int n) {\n"
           "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a * %d; }\n",
           i, i + 1);
  memset(c, 0, sizeof *c);
  c->struct_size = CUASYNC_COMPILE_IMAGE_ARGS_SIZE;
  c->arch = "compute_90";
  c->name = "started.cu";
  c->source = source;
  c->name_expressions = expr;
  c->num_name_expressions = 1;
}

static void test_compiles_in_flight(void) {
  cuasync_queue_create_args qc = {CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD, NULL};
  if (!ok(api->queue_create(&qc), "queue_create")) return;
  cuasync_queue_fd_args qf = {CUASYNC_QUEUE_FD_ARGS_SIZE, qc.queue, -1};
  CHECK(ok(api->queue_fd(&qf), "queue_fd"));
  static char sources[jobs][256];
  static char names[jobs][32];
  const char* expressions[jobs][1];
  cuasync_compile_image_args c[jobs];
  cuasync_compile_job job[jobs];
  for (int i = 0; i < jobs; ++i) {
    snprintf(names[i], sizeof names[i], "scale%d<float>", i);
    expressions[i][0] = names[i];
    start_args(&c[i], sources[i], sizeof sources[i], i, expressions[i]);
    cuasync_compile_image_start_args s;
    memset(&s, 0, sizeof s);
    s.struct_size = CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE;
    s.compile = &c[i];
    s.completion.queue = qc.queue;
    s.completion.token = 100 + (uint64_t)i;
    job[i] = NULL;
    if (ok(api->compile_image_start(&s), "compile_image_start")) job[i] = s.job;
    CHECK(c[i].image == NULL); /* the out fields are finish's */
  }
  /* A compile error: its completion carries the code, finish returns the error (the first line quoted). */
  cuasync_compile_image_args bad;
  memset(&bad, 0, sizeof bad);
  bad.struct_size = CUASYNC_COMPILE_IMAGE_ARGS_SIZE;
  bad.arch = "sm_90";
  bad.name = "broken_started.cu";
  bad.source = "__global__ void k() { undefined_started_name = 1; }\n";
  cuasync_compile_image_start_args sb;
  memset(&sb, 0, sizeof sb);
  sb.struct_size = CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE;
  sb.compile = &bad;
  sb.completion.queue = qc.queue;
  sb.completion.token = 99;
  cuasync_compile_job bad_job = NULL;
  if (ok(api->compile_image_start(&sb), "compile_image_start (a compile error)")) bad_job = sb.job;

  cuasync_completion_record r[jobs + 1];
  const int got = drain_until(qc.queue, qf.fd, r, jobs + 1);
  CHECK(got == jobs + 1);
  int seen[jobs] = {0}, bad_seen = 0;
  for (int i = 0; i < got; ++i) {
    if (r[i].token == 99) {
      bad_seen = 1;
      CHECK(r[i].code == CUASYNC_ERROR_COMPILE);
    } else if (r[i].token >= 100 && r[i].token < 100 + jobs) {
      seen[r[i].token - 100] += 1;
      CHECK(r[i].code == CUASYNC_OK);
    } else {
      CHECK(!"a completion with a token no job had");
    }
  }
  CHECK(bad_seen);
  for (int i = 0; i < jobs; ++i) {
    CHECK(seen[i] == 1);
    if (!job[i]) continue;
    cuasync_compile_image_finish_args f = {CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE, job[i], &c[i]};
    if (!ok(api->compile_image_finish(&f), "compile_image_finish")) continue;
    /* The same image as the blocking call gives (a memory hit now). */
    cuasync_compile_image_args again;
    start_args(&again, sources[i], sizeof sources[i], i, expressions[i]);
    if (ok(api->compile_image(&again), "compile_image after the job")) {
      CHECK(again.size == c[i].size && memcmp(again.data, c[i].data, c[i].size) == 0);
      CHECK(strcmp(again.lowered_names[0], c[i].lowered_names[0]) == 0);
      cuasync_image_destroy_args d = {CUASYNC_IMAGE_DESTROY_ARGS_SIZE, again.image};
      CHECK(ok(api->image_destroy(&d), "image_destroy"));
    }
    CHECK(c[i].kind == CUASYNC_IMAGE_PTX && strstr((const char*)c[i].data, ".entry") != NULL);
    CHECK(strcmp(c[i].architecture, "compute_90") == 0);
    CHECK(code_of(api->compile_image_finish(&f)) == CUASYNC_ERROR_STALE_HANDLE); /* once only */
    cuasync_image_destroy_args d = {CUASYNC_IMAGE_DESTROY_ARGS_SIZE, c[i].image};
    CHECK(ok(api->image_destroy(&d), "image_destroy"));
  }
  if (bad_job) {
    cuasync_compile_image_finish_args f = {CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE, bad_job, &bad};
    cuasync_error* e = api->compile_image_finish(&f);
    CHECK(message_has(e, "undefined_started_name"));
    if (e) {
      const cuasync_error_info_args info = info_of(e);
      CHECK(info.code == CUASYNC_ERROR_COMPILE && info.nvrtc_result != 0);
      api->error_destroy(e);
    }
    CHECK(bad.image == NULL);
  }
  printf("compile jobs: %d of %d completions (one a compile error), each image equal to compile_image's\n", got,
         jobs + 1);
  cuasync_queue_destroy_args qd = {CUASYNC_QUEUE_DESTROY_ARGS_SIZE, qc.queue};
  CHECK(ok(api->queue_destroy(&qd), "queue_destroy"));
}

/* finish before the completion waits for the compile; a job without a completion queue is fine. */
static void test_finish_waits(void) {
  static char source[256];
  const char* expr[1] = {"scale77<double>"};
  cuasync_compile_image_args c;
  start_args(&c, source, sizeof source, 77, expr);
  cuasync_compile_image_start_args s;
  memset(&s, 0, sizeof s);
  s.struct_size = CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE;
  s.compile = &c;
  if (!ok(api->compile_image_start(&s), "compile_image_start without a completion")) return;
  cuasync_compile_image_finish_args f = {CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE, s.job, &c};
  if (ok(api->compile_image_finish(&f), "compile_image_finish at once")) {
    CHECK(c.image != NULL && c.size > 0 && c.lowered_names != NULL);
    cuasync_image_destroy_args d = {CUASYNC_IMAGE_DESTROY_ARGS_SIZE, c.image};
    CHECK(ok(api->image_destroy(&d), "image_destroy"));
  }
}

/* Argument errors are the start call's: no job is made. */
static void test_start_refusals(void) {
  cuasync_compile_image_start_args s;
  memset(&s, 0, sizeof s);
  s.struct_size = CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE;
  cuasync_error* e = api->compile_image_start(&s);
  CHECK(message_has(e, "compile_image_start") && code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  static char source[256];
  const char* expr[1] = {"scale5<float>"};
  cuasync_compile_image_args c;
  start_args(&c, source, sizeof source, 5, expr);
  c.arch = "sm_999";
  s.compile = &c;
  e = api->compile_image_start(&s);
  CHECK(message_has(e, "sm_999") && code_of(e) == CUASYNC_ERROR_UNSUPPORTED);
  CHECK(s.job == NULL);
  c.arch = "sm_90";
  c.struct_size = 8; /* smaller than any version of the compile's struct */
  CHECK(code_of(api->compile_image_start(&s)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  c.struct_size = CUASYNC_COMPILE_IMAGE_ARGS_SIZE;
  s.completion.token = 1; /* a token without a queue reports nowhere: accepted, as everywhere */
  s.completion.callback = (cuasync_callback)(uintptr_t)1; /* a callback without a queue is refused */
  CHECK(code_of(api->compile_image_start(&s)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  cuasync_compile_image_finish_args f = {CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE,
                                         (cuasync_compile_job)(uintptr_t)0x7a7a7a0a, &c};
  CHECK(code_of(api->compile_image_finish(&f)) == CUASYNC_ERROR_STALE_HANDLE);
  f.result = NULL;
  CHECK(code_of(api->compile_image_finish(&f)) == CUASYNC_ERROR_INVALID_ARGUMENT);
}

void run_abi_1_5_part(void) {
  if (api->struct_size < CUASYNC_API_SIZE_1_5) return;
  CHECK(api->abi_minor >= 5);
  test_start_refusals();
  test_finish_waits();
  test_compiles_in_flight();
}
