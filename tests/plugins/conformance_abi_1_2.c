// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The conformance suite's ABI 1.2 part: the library's version, the log sink, compiling to an image without a GPU
 * (NVRTC only: no driver is needed), and a runtime's admission bounds (on a driver: the simulated one in CI). */
#define _GNU_SOURCE
#include "conformance.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void test_library_version(void) {
  CHECK(api->abi_minor >= 2);
  CHECK(api->struct_size >= CUASYNC_API_SIZE_1_2);
  CHECK(CUASYNC_API_SIZE_1_1 == CUASYNC_API_SIZE_1_0 && CUASYNC_API_SIZE_1_2 > CUASYNC_API_SIZE_1_1);
  if (api->struct_size < CUASYNC_API_SIZE_1_2) return;
  cuasync_library_version_args v;
  memset(&v, 0, sizeof v);
  v.struct_size = CUASYNC_LIBRARY_VERSION_ARGS_SIZE;
  CHECK(ok(api->library_version(&v), "library_version"));
  CHECK(v.version != NULL);
  if (v.version) {
    char text[64];
    snprintf(text, sizeof text, "%u.%u.%u", v.major, v.minor, v.patch);
    CHECK(strcmp(text, v.version) == 0);
    CHECK(v.major >= 1);
  }
  v.struct_size = 12; /* cuts `minor` in two */
  CHECK(code_of(api->library_version(&v)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(code_of(api->library_version(NULL)) == CUASYNC_ERROR_INVALID_ARGUMENT);
}

/* ---- the log sink ------------------------------------------------------------------------------------------------ */

typedef struct captured {
  atomic_int lines, jit_lines, bad_levels;
} captured;

static void capture(void* user, int level, const char* message) {
  captured* c = (captured*)user;
  atomic_fetch_add(&c->lines, 1);
  if (level != CUASYNC_LOG_INFO && level != CUASYNC_LOG_DEBUG) atomic_fetch_add(&c->bad_levels, 1);
  if (strstr(message, "JIT") || strstr(message, "NVRTC")) atomic_fetch_add(&c->jit_lines, 1);
}

static atomic_int replaced_calls;
/* A sink that replaces itself from inside its own call (with nothing: stderr, off): must not deadlock. */
static void replace_self(void* user, int level, const char* message) {
  (void)user, (void)level, (void)message;
  atomic_fetch_add(&replaced_calls, 1);
  cuasync_log_sink_set_args s = {CUASYNC_LOG_SINK_SET_ARGS_SIZE, NULL, NULL, CUASYNC_LOG_OFF};
  ok(api->log_sink_set(&s), "log_sink_set from a sink");
}

static const char saxpy[] =
    "template <class T> __global__ void scale(T* x, T a, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }\n"
    "extern \"C\" __global__ void fill(float* x, float v, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }\n";

static cuasync_error* compile_for(const char* arch, cuasync_compile_image_args* c) {
  static const char* const expressions[] = {"scale<float>", "scale<double>"};
  memset(c, 0, sizeof *c);
  c->struct_size = CUASYNC_COMPILE_IMAGE_ARGS_SIZE;
  c->arch = arch;
  c->name = "scale.cu";
  c->source = saxpy;
  c->name_expressions = expressions;
  c->num_name_expressions = 2;
  return api->compile_image(c);
}

static void destroy_image(cuasync_image image) {
  cuasync_image_destroy_args d = {CUASYNC_IMAGE_DESTROY_ARGS_SIZE, image};
  CHECK(ok(api->image_destroy(&d), "image_destroy"));
  CHECK(code_of(api->image_destroy(&d)) == CUASYNC_ERROR_STALE_HANDLE); /* once only */
}

static void test_log_sink(void) {
  captured c;
  atomic_init(&c.lines, 0);
  atomic_init(&c.jit_lines, 0);
  atomic_init(&c.bad_levels, 0);
  cuasync_log_sink_set_args s = {CUASYNC_LOG_SINK_SET_ARGS_SIZE, capture, &c, 7};
  CHECK(code_of(api->log_sink_set(&s)) == CUASYNC_ERROR_INVALID_ARGUMENT); /* not a level */
  s.level = CUASYNC_LOG_INFO;
  CHECK(ok(api->log_sink_set(&s), "log_sink_set"));
  /* A compile logs at info: NVRTC's load (the first in the process) and the cache's outcome. */
  cuasync_compile_image_args ci;
  cuasync_error* e = compile_for("compute_90", &ci);
  if (ok(e, "compile_image compute_90")) destroy_image(ci.image);
  CHECK(atomic_load(&c.jit_lines) >= 1);
  CHECK(atomic_load(&c.bad_levels) == 0);

  /* Back to stderr, off: the sink is never called again. */
  cuasync_log_sink_set_args off = {CUASYNC_LOG_SINK_SET_ARGS_SIZE, NULL, NULL, CUASYNC_LOG_OFF};
  CHECK(ok(api->log_sink_set(&off), "log_sink_set NULL"));
  const int before = atomic_load(&c.lines);
  if (ok(compile_for("compute_90", &ci), "compile_image again")) destroy_image(ci.image);
  CHECK(atomic_load(&c.lines) == before);

  /* A sink that sets another from inside its call returns (its own call is not waited for). */
  cuasync_log_sink_set_args self = {CUASYNC_LOG_SINK_SET_ARGS_SIZE, replace_self, NULL, CUASYNC_LOG_DEBUG};
  CHECK(ok(api->log_sink_set(&self), "log_sink_set replace_self"));
  if (ok(compile_for("compute_90", &ci), "compile_image with replace_self")) destroy_image(ci.image);
  CHECK(atomic_load(&replaced_calls) == 1); /* the memory hit's debug line; then the log is off */
  CHECK(ok(api->log_sink_set(&off), "log_sink_set NULL"));
}

/* ---- compiling without a GPU ------------------------------------------------------------------------------------- */

static void test_compile_image(void) {
  cuasync_compile_image_args c;
  if (ok(compile_for("sm_90", &c), "compile_image sm_90")) {
    CHECK(c.kind == CUASYNC_IMAGE_CUBIN);
    CHECK(c.size > 4 && memcmp(c.data, "\x7f" "ELF", 4) == 0);
    CHECK(strcmp(c.architecture, "sm_90") == 0);
    CHECK(c.log != NULL && strlen(c.log) == c.log_size);
    CHECK(c.lowered_names != NULL);
    if (c.lowered_names) {
      CHECK(strncmp(c.lowered_names[0], "_Z", 2) == 0 && strstr(c.lowered_names[0], "scale") != NULL);
      CHECK(strcmp(c.lowered_names[0], c.lowered_names[1]) != 0);
    }
    destroy_image(c.image);
  }
  if (ok(compile_for("compute_90", &c), "compile_image compute_90")) {
    const char* ptx = (const char*)c.data;
    CHECK(c.kind == CUASYNC_IMAGE_PTX && ptx[c.size] == '\0' && strlen(ptx) == c.size);
    CHECK(strstr(ptx, ".version") != NULL && strstr(ptx, ".entry fill") != NULL);
    CHECK(strcmp(c.architecture, "compute_90") == 0);
    destroy_image(c.image);
  }
  if (ok(compile_for("90", &c), "compile_image 90")) { /* a bare number is sm_ */
    CHECK(c.kind == CUASYNC_IMAGE_CUBIN && strcmp(c.architecture, "sm_90") == 0);
    destroy_image(c.image);
  }
  /* An architecture NVRTC does not know is refused, naming those it does (never a quiet substitute). */
  cuasync_error* e = compile_for("sm_999", &c);
  CHECK(message_has(e, "compile_image") && message_has(e, "sm_999") && message_has(e, "sm_90"));
  CHECK(code_of(e) == CUASYNC_ERROR_UNSUPPORTED);
  e = compile_for("sm_9x", &c);
  CHECK(message_has(e, "sm_9x"));
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(code_of(compile_for(NULL, &c)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(c.image == NULL);
  /* A compile error: the first error's line quoted, the nvrtcResult set, no image. */
  memset(&c, 0, sizeof c);
  c.struct_size = CUASYNC_COMPILE_IMAGE_ARGS_SIZE;
  c.arch = "sm_90";
  c.name = "broken.cu";
  c.source = "__global__ void k() { undefined_name = 1; }\n";
  e = api->compile_image(&c);
  CHECK(message_has(e, "undefined_name"));
  if (e) {
    const cuasync_error_info_args info = info_of(e);
    CHECK(info.code == CUASYNC_ERROR_COMPILE && info.nvrtc_result != 0);
    CHECK(strstr(info.message, ".cpp:") == NULL || getenv("CUASYNC_DEBUG") != NULL);
    api->error_destroy(e);
  }
  CHECK(c.image == NULL);
  /* A stale or NULL image. */
  cuasync_image_destroy_args d = {CUASYNC_IMAGE_DESTROY_ARGS_SIZE, NULL};
  CHECK(code_of(api->image_destroy(&d)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  d.image = (cuasync_image)(uintptr_t)0x7a7a7a09;
  CHECK(code_of(api->image_destroy(&d)) == CUASYNC_ERROR_STALE_HANDLE);
}

void run_abi_1_2_part(void) {
  test_library_version();
  if (api->struct_size < CUASYNC_API_SIZE_1_2) return;
  test_log_sink();
  test_compile_image();
  /* Admission bounds need a runtime: without a driver only the handle checks. */
  cuasync_admission_limits_args l;
  memset(&l, 0, sizeof l);
  l.struct_size = CUASYNC_ADMISSION_LIMITS_ARGS_SIZE;
  CHECK(code_of(api->runtime_admission_get(&l)) == CUASYNC_ERROR_INVALID_ARGUMENT);
  l.runtime = (cuasync_runtime)(uintptr_t)0x7a7a7a01;
  CHECK(code_of(api->runtime_admission_set(&l)) == CUASYNC_ERROR_STALE_HANDLE);
}

/* On a driver: a runtime's bounds read, changed, refused when inconsistent, and shared by the context's runtimes. */
void run_admission_part(void) {
  if (api->struct_size < CUASYNC_API_SIZE_1_2) return;
  cuasync_runtime_create_args rc, rc2;
  memset(&rc, 0, sizeof rc);
  rc.struct_size = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
  rc2 = rc;
  if (!ok(api->runtime_create(&rc), "runtime_create")) return;
  if (!ok(api->runtime_create(&rc2), "runtime_create (a second)")) return;
  CHECK(rc.runtime != rc2.runtime); /* a new runtime per call */
  cuasync_admission_limits_args l = {CUASYNC_ADMISSION_LIMITS_ARGS_SIZE, rc.runtime, 0, 0};
  CHECK(ok(api->runtime_admission_get(&l), "runtime_admission_get"));
  CHECK(l.per_stream == 64 && l.per_context == 500); /* the defaults the header names */
  l.per_stream = 8;
  l.per_context = 100;
  CHECK(ok(api->runtime_admission_set(&l), "runtime_admission_set"));
  cuasync_admission_limits_args other = {CUASYNC_ADMISSION_LIMITS_ARGS_SIZE, rc2.runtime, 0, 0};
  CHECK(ok(api->runtime_admission_get(&other), "runtime_admission_get (the second)"));
  CHECK(other.per_stream == 8 && other.per_context == 100); /* the context's bounds, shared */
  l.per_stream = 200; /* above per_context */
  cuasync_error* e = api->runtime_admission_set(&l);
  CHECK(message_has(e, "per_stream 200") && message_has(e, "per_context 100"));
  CHECK(code_of(e) == CUASYNC_ERROR_INVALID_ARGUMENT);
  CHECK(ok(api->runtime_admission_get(&other), "runtime_admission_get"));
  CHECK(other.per_stream == 8 && other.per_context == 100); /* unchanged by the refused call */
  l.per_stream = 200;
  l.per_context = 0; /* no context bound: any per_stream */
  CHECK(ok(api->runtime_admission_set(&l), "runtime_admission_set (no context bound)"));
  l.per_stream = 64;
  l.per_context = 500;
  CHECK(ok(api->runtime_admission_set(&l), "runtime_admission_set (the defaults again)"));
  cuasync_runtime_destroy_args rd = {CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, rc2.runtime};
  CHECK(ok(api->runtime_destroy(&rd), "runtime_destroy"));
  rd.runtime = rc.runtime;
  CHECK(ok(api->runtime_destroy(&rd), "runtime_destroy"));
  l.runtime = rc.runtime; /* destroyed */
  CHECK(code_of(api->runtime_admission_get(&l)) == CUASYNC_ERROR_STALE_HANDLE);
}
