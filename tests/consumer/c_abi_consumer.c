/* SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception */
/* A C framework's plugin loader on the installed C ABI, built with `pkg-config --cflags --libs cuasync` alone:
   dlopen()s the library that `pkg-config --variable=library cuasync` names (argv[1]), takes the table from
   cuasync_get_api, and does what needs no GPU: a completion queue that host work completes (a host token, its record
   drained once the queue's eventfd is readable), and another ABI major refused with a readable error.
   Exit 0: every check passed. */
#include <cuasync/cuasync.h>

#include <dlfcn.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;
static int check(int ok, const char* what) {
  printf("consumer_c_abi: %s: %s\n", ok ? "ok" : "FAILED", what);
  failures += !ok;
  return ok;
}

static const cuasync_api* api;

/* Prints and destroys `err`; returns 1 when there was none. */
static int succeeded(cuasync_error* err, const char* call) {
  if (!err) return 1;
  cuasync_error_info_args info;
  memset(&info, 0, sizeof info);
  info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
  info.error = err;
  api->error_info(&info);
  printf("consumer_c_abi: FAILED: %s: code %d: %s\n", call, (int)info.code, info.message);
  api->error_destroy(err);
  failures++;
  return 0;
}

static void host_completion(void) {
  cuasync_queue_create_args q;
  memset(&q, 0, sizeof q);
  q.struct_size = CUASYNC_QUEUE_CREATE_ARGS_SIZE;
  q.flags = CUASYNC_QUEUE_FD;
  if (!succeeded(api->queue_create(&q), "queue_create")) return;
  cuasync_queue_fd_args fd;
  memset(&fd, 0, sizeof fd);
  fd.struct_size = CUASYNC_QUEUE_FD_ARGS_SIZE;
  fd.queue = q.queue;
  cuasync_host_token_create_args t;
  memset(&t, 0, sizeof t);
  t.struct_size = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
  t.completion.queue = q.queue;
  t.completion.token = 7;
  if (succeeded(api->queue_fd(&fd), "queue_fd") && succeeded(api->host_token_create(&t), "host_token_create")) {
    cuasync_host_token_complete_args c;
    memset(&c, 0, sizeof c);
    c.struct_size = CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE;
    c.token = t.token;
    c.code = CUASYNC_OK;
    if (succeeded(api->host_token_complete(&c), "host_token_complete")) {
      struct pollfd p = {fd.fd, POLLIN, 0};
      check(poll(&p, 1, 10000) == 1, "the queue's eventfd became readable once the host token was completed");
      cuasync_completion_record records[4];
      cuasync_queue_drain_args d;
      memset(&d, 0, sizeof d);
      d.struct_size = CUASYNC_QUEUE_DRAIN_ARGS_SIZE;
      d.queue = q.queue;
      d.records = records;
      d.capacity = 4;
      if (succeeded(api->queue_drain(&d), "queue_drain"))
        check(d.count == 1 && records[0].token == 7 && records[0].code == CUASYNC_OK,
              "queue_drain gave the host token's record (token 7, CUASYNC_OK)");
    }
  }
  cuasync_queue_destroy_args qd;
  memset(&qd, 0, sizeof qd);
  qd.struct_size = CUASYNC_QUEUE_DESTROY_ARGS_SIZE;
  qd.queue = q.queue;
  succeeded(api->queue_destroy(&qd), "queue_destroy");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LIBCUASYNC\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!check(lib != NULL, "dlopen of the library the .pc names")) {
    printf("consumer_c_abi: %s: %s\n", argv[1], dlerror());
    return 1;
  }
  cuasync_get_api_fn get_api = (cuasync_get_api_fn)dlsym(lib, "cuasync_get_api");
  if (!check(get_api != NULL, "dlsym cuasync_get_api")) return 1;
  cuasync_error* err = get_api(CUASYNC_ABI_MAJOR, &api);
  if (!check(err == NULL && api != NULL, "cuasync_get_api(CUASYNC_ABI_MAJOR)")) return 1;
  printf("consumer_c_abi: %s: ABI %u.%u, a table of %zu bytes\n", argv[1], (unsigned)api->abi_major,
         (unsigned)api->abi_minor, api->struct_size);
  check(api->abi_major == CUASYNC_ABI_MAJOR && api->abi_minor >= CUASYNC_ABI_MINOR,
        "the library's ABI has the header's major and at least its minor");

  host_completion();

  /* Another major: refused with an error, and the table still set so that the error can be read and freed. */
  const cuasync_api* other = NULL;
  cuasync_error* refused = get_api(CUASYNC_ABI_MAJOR + 1, &other);
  if (check(refused != NULL && other != NULL, "cuasync_get_api(another major) is refused")) {
    cuasync_error_info_args info;
    memset(&info, 0, sizeof info);
    info.struct_size = CUASYNC_ERROR_INFO_ARGS_SIZE;
    info.error = refused;
    other->error_info(&info);
    printf("consumer_c_abi: refused: code %d: %s\n", (int)info.code, info.message);
    check(info.code == CUASYNC_ERROR_UNSUPPORTED && info.message_size > 0,
          "the refusal is CUASYNC_ERROR_UNSUPPORTED with a message");
    other->error_destroy(refused);
  }
  /* No dlclose: as every plugin loader does, the library stays for the process (its threads and tables with it). */
  printf("consumer_c_abi: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
