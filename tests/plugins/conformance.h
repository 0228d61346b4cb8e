/* Shared by the conformance suite's parts: the check macro and its counters, and reading errors through the table. */
#ifndef CUASYNC_CONFORMANCE_H
#define CUASYNC_CONFORMANCE_H

#include <cuasync/cuasync.h>

#include <stdio.h>

extern int checks, failures;
extern const cuasync_api* api;

#define CHECK(cond)                                                     \
  do {                                                                  \
    ++checks;                                                           \
    if (!(cond)) {                                                      \
      ++failures;                                                       \
      fprintf(stderr, "FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                   \
  } while (0)

/* The error's code, after checking that it carries a message; frees it. CUASYNC_OK for NULL. */
cuasync_error_code code_of(cuasync_error* e);
/* True when the error's message contains `needle` (prints it otherwise); does not free it. */
int message_has(cuasync_error* e, const char* needle);
/* Prints the error (what failed, its code and message) without freeing it. */
void print_error(const char* what, cuasync_error* e);
/* True when `e` is NULL; otherwise prints it as a failure of `what`, frees it and counts a failure. */
int ok(cuasync_error* e, const char* what);

/* The GPU part (conformance_gpu.c); returns nothing, counts through CHECK. */
void run_gpu_part(void);

#endif
