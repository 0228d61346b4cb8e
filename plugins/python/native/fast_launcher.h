// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The Launcher type's insides, shared by fast_launch.c (the type, pack, fire, launch_untracked) and fast_call.c
 * (call_untracked: the whole of Kernel.launch_untracked in C). */
#ifndef CUASYNC_PYTHON_FAST_LAUNCHER_H
#define CUASYNC_PYTHON_FAST_LAUNCHER_H

#include "fast.h"

typedef struct {
  PyObject_HEAD
  unsigned long long kernel;
  Py_ssize_t n;
  uint32_t* sizes;
  uint32_t* types;  /* each parameter's cuasync_arg_type (a C++ kernel), or NULL: sizes only (extern "C") */
  /* call_untracked's fallbacks (bind_untracked; NULL until then): the Kernel (a cycle through its launch_untracked
   * attribute, which the collector breaks: the type is garbage-collected), the cuasync Stream class,
   * Kernel.launch_untracked and Kernel._untracked_failed (functions). */
  PyObject *owner, *stream_type, *general, *failed;
  /* call_tracked's (bind_tracked; NULL until then): Kernel.launch (the general path: a framework's stream, anything
   * call_tracked leaves to the package), the kernel's `launched(stream)` (the Pending of a launch outside a loop) and
   * `_launch_packed(stream, values, blob, uses, loop)` (a launch packed into `blob`: its uses noted, then issued into
   * the running loop's queue or fired), and asyncio's `_get_running_loop`. */
  PyObject *tracked_general, *launched, *packed, *running_loop;
  /* `collect`, the package's collect(), called every 16th launch outside a loop (not through `launched` each time). */
  PyObject* collect;
  unsigned since_collect;
  /* call_tracked in a running loop (bind_loop; NULL until then): `queue_of(loop)` (the loop's LoopCompletions) and
   * the package's token counter; the last loop's queue, its `_loop` weakref, its `_backlogs` dict and its handle,
   * so that a launch reaches the driver before any Python runs (the queue's `fired` makes the future after). */
  PyObject *queue_of, *tokens;
  /* bind_pending: the package's Pending class, made here for a launch outside a loop (its slots set from C: no
   * Python frame), or NULL: `launched(stream)` makes it. */
  PyObject* pending_type;
  PyObject *loop_queue, *loop_ref, *loop_backlogs;
  unsigned long long loop_handle;
} launcher;

/* The blob: [cuasync_launch_args][cuasync_kernel_arg x n][one 8-byte slot per value]. */
#define HEAD_SIZE (sizeof(cuasync_launch_args))
#define BLOB_SIZE(n) (HEAD_SIZE + (size_t)(n) * (sizeof(cuasync_kernel_arg) + 8))

/* Where fill() leaves what the package notes: the buffers not last used on the stream and the framework arguments
 * (indices into the launch's arguments; `foreign` empty when producers are not asked), `producers` (a new list, or
 * NULL) the stream each framework argument's producer works on. */
typedef struct {
  Py_ssize_t small[16 * 2];
  Py_ssize_t *buffers, *foreign;
  Py_ssize_t nb, nf;
  PyObject* producers;
} uses_t;

void uses_free(uses_t* u);
PyObject* index_tuple(const Py_ssize_t* items, Py_ssize_t n);
/* Lays out one launch in `base` (BLOB_SIZE(n) bytes) from the tuple `args`, or from `items[0..count)` when `items`
 * is not NULL. 1: done; 0: the package's general path (no error set); -1: an error is set. `ask_producers` 0:
 * framework memory is not ordered (an untracked launch), so neither its producer streams nor their indices are
 * gathered. `u` is the caller's to free with uses_free on every result. */
int fill(launcher* self, PyObject* stream_obj, PyObject* grid, PyObject* block, PyObject* shared_memory,
         unsigned long long flags, PyObject* args, PyObject* const* items, Py_ssize_t count, char* base,
         int ask_producers, uses_t* u);

/* The Python value of what a launch has the package note: None, or (buffer indices, foreign indices, producers). */
PyObject* uses_value(const uses_t* u);

PyObject* fast_launch_untracked(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* fast_launch_now(PyObject* self, PyObject* const* args, Py_ssize_t nargs);
PyObject* fast_bind_untracked(PyObject* self, PyObject* args);
PyObject* fast_call_untracked(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
PyObject* fast_bind_tracked(PyObject* self, PyObject* args);
PyObject* fast_bind_loop(PyObject* self, PyObject* args);
PyObject* fast_bind_pending(PyObject* self, PyObject* args);
PyObject* fast_call_tracked(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames);
void fast_call_clear(launcher* self);

#endif
