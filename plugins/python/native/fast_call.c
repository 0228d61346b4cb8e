// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* call_untracked(stream, grid, block, *args, shared_memory=0): the whole of Kernel.launch_untracked in one C call
 * (METH_FASTCALL | METH_KEYWORDS), which the package installs as the kernel's own `launch_untracked` attribute. The
 * values are read from the call's argument vector (no *args tuple), packed on the C stack and launched; buffers last
 * used on another stream are noted after (`note_use(stream, False)`). Anything else (a framework's stream, a value the
 * packer leaves to the package, more than 16 parameters) goes to the Python method it replaces, `general(kernel,
 * *args, **kwargs)`, which converts it or raises with its message; a refused launch goes to `failed(kernel, error)`.
 * Per call this is what cuda.core's launch does: the values packed, then the driver's launch. */
#include "fast_launcher.h"  // Python.h before any system header

static PyObject* s_note_use;
static PyObject* s_shared_memory;
static PyObject *s_fired, *s_handle_attr, *s_backlogs_attr, *s_loop_attr;
static PyObject *s_stream_attr, *s_what_attr, *s_state_attr, *s_probe_attr, *s_no_args;

static void forget_loop(launcher* self) {
  Py_CLEAR(self->loop_queue);
  Py_CLEAR(self->loop_ref);
  Py_CLEAR(self->loop_backlogs);
  self->loop_handle = 0;
}

void fast_call_clear(launcher* self) {
  Py_CLEAR(self->owner);
  Py_CLEAR(self->stream_type);
  Py_CLEAR(self->general);
  Py_CLEAR(self->failed);
  Py_CLEAR(self->tracked_general);
  Py_CLEAR(self->launched);
  Py_CLEAR(self->packed);
  Py_CLEAR(self->running_loop);
  Py_CLEAR(self->collect);
  Py_CLEAR(self->queue_of);
  Py_CLEAR(self->tokens);
  Py_CLEAR(self->pending_type);
  forget_loop(self);
}

/* bind_untracked(kernel, stream_type, general, failed) */
PyObject* fast_bind_untracked(PyObject* self_, PyObject* args) {
  launcher* self = (launcher*)self_;
  PyObject *owner, *stream_type, *general, *failed;
  if (!PyArg_ParseTuple(args, "OOOO:bind_untracked", &owner, &stream_type, &general, &failed)) return NULL;
  if (!PyType_Check(stream_type) || !PyCallable_Check(general) ||
      !PyCallable_Check(failed)) {
    PyErr_SetString(PyExc_TypeError, "bind_untracked: expected (kernel, a type, a callable, a callable)");
    return NULL;
  }
  if ((!s_note_use && !(s_note_use = PyUnicode_InternFromString("note_use"))) ||
      (!s_shared_memory && !(s_shared_memory = PyUnicode_InternFromString("shared_memory")))) {
    return NULL;
  }
  fast_call_clear(self);
  Py_INCREF(owner);
  Py_INCREF(stream_type);
  Py_INCREF(general);
  Py_INCREF(failed);
  self->owner = owner;
  self->stream_type = stream_type;
  self->general = general;
  self->failed = failed;
  Py_RETURN_NONE;
}

/* `f(kernel, *items)` (and the call's keywords when `kwnames` is set): the Python side's general path or raiser. */
static PyObject* call_owner(launcher* self, PyObject* f, PyObject* const* items, Py_ssize_t n, PyObject* kwnames) {
  PyObject* kernel = self->owner;
  Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
  PyObject* a = PyTuple_New(n + 1);
  PyObject* kw = nk ? PyDict_New() : NULL;
  if (!a || (nk && !kw)) goto fail;
  Py_INCREF(kernel);
  PyTuple_SetItem(a, 0, kernel);
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(items[i]);
    PyTuple_SetItem(a, i + 1, items[i]);
  }
  for (Py_ssize_t i = 0; i < nk; ++i) {
    if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, i), items[n + i]) < 0) goto fail;
  }
  PyObject* r = PyObject_Call(f, a, kw);
  Py_DECREF(a);
  Py_XDECREF(kw);
  return r;
fail:
  Py_XDECREF(a);
  Py_XDECREF(kw);
  return NULL;
}

/* Whether a call (stream, grid, block, *values, shared_memory=...) is one the C launches take: a cuasync Stream, the
 * kernel's count of values (at most 16), no keyword but shared_memory. 1 with `*shared` (borrowed: the keyword's
 * value, or 0); 0 for the Python method; -1 with an error set. */
static int call_shape(launcher* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, PyObject** shared) {
  static PyObject* zero;
  *shared = NULL;
  Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
  if (nk == 1 && PyTuple_GetItem(kwnames, 0) == s_shared_memory) *shared = args[nargs];  // interned by the compiler
  if (nargs < 3 || (nk && !*shared) || nk > 1 || (PyObject*)Py_TYPE(args[0]) != self->stream_type ||
      nargs - 3 != self->n || self->n > 16 || !fast_api) {
    return 0;
  }
  if (!*shared && !(*shared = zero ? zero : (zero = PyLong_FromLong(0)))) return -1;
  return 1;
}

PyObject* fast_call_untracked(PyObject* self_, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  launcher* self = (launcher*)self_;
  if (!self->general) {
    PyErr_SetString(PyExc_RuntimeError, "cuasync._fast: call_untracked before bind_untracked");
    return NULL;
  }
  PyObject* shared;
  const int native = call_shape(self, args, nargs, kwnames, &shared);
  if (native < 0) return NULL;
  if (!native) return call_owner(self, self->general, args, nargs, kwnames);
  _Alignas(16) char base[BLOB_SIZE(16)];
  uses_t u;
  int r = fill(self, args[0], args[1], args[2], shared, CUASYNC_LAUNCH_UNTRACKED, NULL, args + 3, nargs - 3, base, 0,
               &u);
  PyObject* result = NULL;
  if (r == 1) {
    cuasync_error* err;
    Py_BEGIN_ALLOW_THREADS
    err = fast_api->launch((cuasync_launch_args*)base);
    Py_END_ALLOW_THREADS
    if (err) {
      PyObject* e = PyLong_FromVoidPtr(err);
      result = e ? call_owner(self, self->failed, &e, 1, NULL) : NULL;
      Py_XDECREF(e);
    } else {
      result = Py_None;
      Py_INCREF(result);
      for (Py_ssize_t i = 0; i < u.nb && result; ++i) {  // buffers last used on another stream: noted, no event
        PyObject* noted = PyObject_CallMethodObjArgs(args[3 + u.buffers[i]], s_note_use, args[0], Py_False, NULL);
        if (!noted) Py_CLEAR(result);
        Py_XDECREF(noted);
      }
    }
  } else if (r == 0 && !PyErr_Occurred()) {
    result = call_owner(self, self->general, args, nargs, kwnames);
  }
  uses_free(&u);
  return result;
}

/* bind_tracked(general, launched, packed, running_loop, collect), after bind_untracked (whose kernel and stream type
 * it shares). */
PyObject* fast_bind_tracked(PyObject* self_, PyObject* args) {
  launcher* self = (launcher*)self_;
  PyObject *general, *launched, *packed, *running_loop, *collect;
  if (!PyArg_ParseTuple(args, "OOOOO:bind_tracked", &general, &launched, &packed, &running_loop, &collect)) {
    return NULL;
  }
  if (!self->owner || !PyCallable_Check(general) || !PyCallable_Check(launched) || !PyCallable_Check(packed) ||
      !PyCallable_Check(running_loop) || !PyCallable_Check(collect)) {
    PyErr_SetString(PyExc_TypeError, "bind_tracked: expected five callables, after bind_untracked");
    return NULL;
  }
  Py_INCREF(general);
  Py_INCREF(launched);
  Py_INCREF(packed);
  Py_INCREF(running_loop);
  Py_INCREF(collect);
  Py_CLEAR(self->tracked_general);
  Py_CLEAR(self->launched);
  Py_CLEAR(self->packed);
  Py_CLEAR(self->running_loop);
  Py_CLEAR(self->collect);
  self->tracked_general = general;
  self->launched = launched;
  self->packed = packed;
  self->running_loop = running_loop;
  self->collect = collect;
  Py_RETURN_NONE;
}

static PyObject* blob_copy(const char* base, Py_ssize_t n);

/* bind_pending(pending_type): the package's Pending class, whose instances for launches outside a loop are made here
 * (its __slots__ _stream, what, _state, _probe set as its __init__ would for an operation without a completion of
 * its own, `what` the kernel: the Pending describes it with the kernel's _describe_launch). */
PyObject* fast_bind_pending(PyObject* self_, PyObject* args) {
  launcher* self = (launcher*)self_;
  PyObject* type;
  if (!PyArg_ParseTuple(args, "O!:bind_pending", &PyType_Type, &type)) return NULL;
  if ((!s_stream_attr && !(s_stream_attr = PyUnicode_InternFromString("_stream"))) ||
      (!s_what_attr && !(s_what_attr = PyUnicode_InternFromString("what"))) ||
      (!s_state_attr && !(s_state_attr = PyUnicode_InternFromString("_state"))) ||
      (!s_probe_attr && !(s_probe_attr = PyUnicode_InternFromString("_probe"))) ||
      (!s_no_args && !(s_no_args = PyTuple_New(0)))) {
    return NULL;
  }
  Py_INCREF(type);
  Py_CLEAR(self->pending_type);
  self->pending_type = type;
  Py_RETURN_NONE;
}

/* A Pending for a launch outside a loop on `stream`: made here (bind_pending), or by `launched(stream)`; the
 * package's collect() every 16th time. */
static PyObject* pending_for(launcher* self, PyObject* stream) {
  if ((++self->since_collect & 15u) == 0) {
    PyObject* r = PyObject_CallObject(self->collect, NULL);
    if (!r) return NULL;
    Py_DECREF(r);
  }
  if (!self->pending_type) return PyObject_CallFunctionObjArgs(self->launched, stream, NULL);
  newfunc make = (newfunc)PyType_GetSlot((PyTypeObject*)self->pending_type, Py_tp_new);
  PyObject* p = make ? make((PyTypeObject*)self->pending_type, s_no_args, NULL) : NULL;
  if (!p) return make ? NULL : PyObject_CallFunctionObjArgs(self->launched, stream, NULL);
  if (PyObject_SetAttr(p, s_stream_attr, stream) < 0 || PyObject_SetAttr(p, s_what_attr, self->owner) < 0 ||
      PyObject_SetAttr(p, s_state_attr, Py_None) < 0 || PyObject_SetAttr(p, s_probe_attr, Py_None) < 0) {
    Py_DECREF(p);
    return NULL;
  }
  return p;
}

/* bind_loop(queue_of, tokens), after bind_tracked: `queue_of(loop)` gives a running loop's LoopCompletions, `tokens`
 * (an iterator of ints) the completion tokens the package's queues share. */
PyObject* fast_bind_loop(PyObject* self_, PyObject* args) {
  launcher* self = (launcher*)self_;
  PyObject *queue_of, *tokens;
  if (!PyArg_ParseTuple(args, "OO:bind_loop", &queue_of, &tokens)) return NULL;
  if (!PyCallable_Check(queue_of) || !PyIter_Check(tokens)) {
    PyErr_SetString(PyExc_TypeError, "bind_loop: expected (a callable, an iterator)");
    return NULL;
  }
  if ((!s_fired && !(s_fired = PyUnicode_InternFromString("fired"))) ||
      (!s_handle_attr && !(s_handle_attr = PyUnicode_InternFromString("handle"))) ||
      (!s_backlogs_attr && !(s_backlogs_attr = PyUnicode_InternFromString("_backlogs"))) ||
      (!s_loop_attr && !(s_loop_attr = PyUnicode_InternFromString("_loop")))) {
    return NULL;
  }
  Py_INCREF(queue_of);
  Py_INCREF(tokens);
  Py_CLEAR(self->queue_of);
  Py_CLEAR(self->tokens);
  forget_loop(self);
  self->queue_of = queue_of;
  self->tokens = tokens;
  Py_RETURN_NONE;
}

/* The running `loop`'s queue in the cache (its `_loop` weakref still names `loop`), else looked up: 1, or -1 with an
 * error set. */
static int cache_loop(launcher* self, PyObject* loop) {
  if (self->loop_ref) {
    PyObject* now = PyObject_CallNoArgs(self->loop_ref);  // a weakref's call: no Python frame
    if (!now) return -1;
    Py_DECREF(now);
    if (now == loop) return 1;
  }
  forget_loop(self);
  PyObject* q = PyObject_CallFunctionObjArgs(self->queue_of, loop, NULL);
  if (!q) return -1;
  PyObject* ref = PyObject_GetAttr(q, s_loop_attr);
  PyObject* backlogs = ref ? PyObject_GetAttr(q, s_backlogs_attr) : NULL;
  PyObject* handle = backlogs ? PyObject_GetAttr(q, s_handle_attr) : NULL;
  unsigned long long h = handle && handle != Py_None ? PyLong_AsUnsignedLongLong(handle) : 0;
  Py_XDECREF(handle);
  if (!backlogs || PyErr_Occurred() || !PyDict_Check(backlogs) || !h) {
    Py_XDECREF(backlogs);
    Py_XDECREF(ref);
    Py_DECREF(q);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "cuasync._fast: a loop's queue without its handle");
    return -1;
  }
  self->loop_queue = q;
  self->loop_ref = ref;
  self->loop_backlogs = backlogs;
  self->loop_handle = h;
  return 1;
}

/* A tracked launch in the running `loop` with nothing to note first, laid out in `base`: issued with its completion
 * into the loop's queue before any Python runs (the token taken here), then the queue's `fired(loop, stream, token,
 * kernel)` makes its future. Nothing drains the queue in between: only the loop's own thread does, from the queue's
 * Python methods. 1: issued (*out the future); 0: left to the packed path (a backlog on the queue keeps the call
 * order; a refused launch, which enqueued nothing, goes there to wait for room or raise its error); -1: error set. */
static int fire_in_loop(launcher* self, PyObject* stream, PyObject* loop, char* base, PyObject** out) {
  if (cache_loop(self, loop) < 0) return -1;
  const Py_ssize_t behind = PyDict_Size(self->loop_backlogs);
  if (behind) return behind < 0 ? -1 : 0;
  PyObject* token = PyIter_Next(self->tokens);
  if (!token) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "cuasync._fast: the token counter ended");
    return -1;
  }
  const unsigned long long t = PyLong_AsUnsignedLongLong(token);
  if (PyErr_Occurred()) {
    Py_DECREF(token);
    return -1;
  }
  // This call's own reference: while the GIL is let go, a thread launching this kernel in another loop may replace
  // the cache.
  PyObject* queue = self->loop_queue;
  Py_INCREF(queue);
  cuasync_launch_args* la = (cuasync_launch_args*)base;
  la->completion.queue = (cuasync_queue)(uintptr_t)self->loop_handle;
  la->completion.token = t;
  cuasync_error* err;
  Py_BEGIN_ALLOW_THREADS
  err = fast_api->launch(la);
  Py_END_ALLOW_THREADS
  if (err) {
    fast_api->error_destroy(err);
    Py_DECREF(token);
    Py_DECREF(queue);
    forget_loop(self);  // a queue gone meanwhile is looked up again
    la->completion.queue = NULL;
    la->completion.token = 0;
    return 0;
  }
  *out = PyObject_CallMethodObjArgs(queue, s_fired, loop, stream, token, self->owner, NULL);
  Py_DECREF(token);
  Py_DECREF(queue);
  return *out ? 1 : -1;
}

/* `packed(stream, values, blob, uses, loop)` for a launch laid out in `base`: its uses noted, then issued by the
 * package (into the loop's queue, or fired outside a loop). */
static PyObject* issue_packed(launcher* self, PyObject* const* args, Py_ssize_t nargs, const char* base,
                              const uses_t* u, PyObject* loop) {
  PyObject* result = NULL;
  PyObject* blob = blob_copy(base, self->n);
  PyObject* uses = blob ? uses_value(u) : NULL;
  PyObject* values = uses ? PyTuple_New(nargs - 3) : NULL;
  for (Py_ssize_t i = 0; values && i < nargs - 3; ++i) {
    Py_INCREF(args[3 + i]);
    PyTuple_SetItem(values, i, args[3 + i]);
  }
  if (values) result = PyObject_CallFunctionObjArgs(self->packed, args[0], values, blob, uses, loop, NULL);
  Py_XDECREF(values);
  Py_XDECREF(uses);
  Py_XDECREF(blob);
  return result;
}

/* Kernel.launch in one C call for a cuasync Stream and values packed on the C stack, when nothing is to be noted or
 * ordered first (every buffer last used on this stream, no framework memory): outside an event loop, launched (no
 * completion of its own), then `launched(stream)` gives the Pending; in a running loop (after bind_loop), launched
 * with its completion into the loop's queue, then the queue's `fired` gives the future (fire_in_loop). With uses to
 * note (or a loop's backlog, or a refused launch in a loop) the blob copied out goes to `packed(stream, values, blob,
 * uses, loop)`, which notes the uses and issues it: packed once, whichever path issues it. Anything else, and a
 * launch the library refused outside a loop (BUSY: the general path retries like the driver; any other error it
 * raises with its words, the launch having enqueued nothing), is Kernel.launch's. */
PyObject* fast_call_tracked(PyObject* self_, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  launcher* self = (launcher*)self_;
  if (!self->tracked_general) {
    PyErr_SetString(PyExc_RuntimeError, "cuasync._fast: call_tracked before bind_tracked");
    return NULL;
  }
  PyObject* shared;
  const int native = call_shape(self, args, nargs, kwnames, &shared);
  if (native < 0) return NULL;
  if (!native) return call_owner(self, self->tracked_general, args, nargs, kwnames);
  PyObject* loop = PyObject_CallObject(self->running_loop, NULL);
  if (!loop) return NULL;
  _Alignas(16) char base[BLOB_SIZE(16)];
  uses_t u;
  const int r = fill(self, args[0], args[1], args[2], shared, 0, NULL, args + 3, nargs - 3, base, 1, &u);
  const int noted = u.nb || u.nf;
  PyObject* result = NULL;
  if (r == 0 && !PyErr_Occurred()) {
    result = call_owner(self, self->tracked_general, args, nargs, kwnames);
  } else if (r == 1 && !noted && loop != Py_None && self->queue_of) {
    if (fire_in_loop(self, args[0], loop, base, &result) == 0) result = issue_packed(self, args, nargs, base, &u, loop);
  } else if (r == 1 && (noted || loop != Py_None)) {
    result = issue_packed(self, args, nargs, base, &u, loop);
  } else if (r == 1) {
    cuasync_error* err;
    Py_BEGIN_ALLOW_THREADS
    err = fast_api->launch((cuasync_launch_args*)base);
    Py_END_ALLOW_THREADS
    if (err) {
      fast_api->error_destroy(err);
      result = call_owner(self, self->tracked_general, args, nargs, kwnames);
    } else {
      result = pending_for(self, args[0]);
    }
  }
  uses_free(&u);
  Py_DECREF(loop);
  return result;
}

/* `base` (a stack blob) copied into a new bytearray, its pointers moved with it: what pack() would have made. */
static PyObject* blob_copy(const char* base, Py_ssize_t n) {
  PyObject* blob = PyByteArray_FromStringAndSize(base, (Py_ssize_t)BLOB_SIZE(n));
  if (!blob) return NULL;
  char* to = PyByteArray_AsString(blob);
  cuasync_launch_args* la = (cuasync_launch_args*)to;
  cuasync_kernel_arg* kargs = (cuasync_kernel_arg*)(to + HEAD_SIZE);
  uint64_t* values = (uint64_t*)(to + HEAD_SIZE + (size_t)n * sizeof(cuasync_kernel_arg));
  la->args = n ? kargs : NULL;
  for (Py_ssize_t i = 0; i < n; ++i) kargs[i].value = &values[i];
  return blob;
}

/* launch_untracked and launch_now (fast_launch.c's type documents them): (stream, grid, block, shared_memory, args)
 * packed on the C stack (more than 16 parameters: the heap) and launched. Untracked: the buffers to note come back
 * after the launch, as indices. Tracked (outside a loop, no completion of its own: a Pending waits on the stream):
 * launched only when nothing is to be noted or ordered first, else the blob comes back copied out with its uses. */
static PyObject* stack_launch(launcher* self, PyObject* const* a, Py_ssize_t na, int tracked) {
  if (na != 5 || !PyTuple_Check(a[4])) {
    PyErr_SetString(PyExc_TypeError, "expected (stream, grid, block, shared_memory, args: tuple)");
    return NULL;
  }
  if (!fast_require_api()) return NULL;
  _Alignas(16) char stack[BLOB_SIZE(16)];
  char* base = self->n <= 16 ? stack : PyMem_Malloc(BLOB_SIZE(self->n));
  if (!base) return PyErr_NoMemory();
  uses_t u;
  PyObject* result = NULL;
  int r = fill(self, a[0], a[1], a[2], a[3], tracked ? 0 : CUASYNC_LAUNCH_UNTRACKED, a[4], NULL, 0, base, tracked, &u);
  if (r == 1 && tracked && (u.nb || u.nf)) {
    PyObject* blob = blob_copy(base, self->n);
    PyObject* uses = blob ? uses_value(&u) : NULL;
    result = uses ? PyTuple_Pack(2, blob, uses) : NULL;
    Py_XDECREF(blob);
    Py_XDECREF(uses);
  } else if (r == 1) {
    cuasync_error* err;
    Py_BEGIN_ALLOW_THREADS
    err = fast_api->launch((cuasync_launch_args*)base);
    Py_END_ALLOW_THREADS
    result = err ? PyLong_FromVoidPtr(err) : u.nb ? index_tuple(u.buffers, u.nb) : (Py_INCREF(Py_None), Py_None);
  } else if (r == 0 && !PyErr_Occurred()) {
    result = Py_NotImplemented;
    Py_INCREF(result);
  }
  uses_free(&u);
  if (base != stack) PyMem_Free(base);
  return result;
}

PyObject* fast_launch_untracked(PyObject* self, PyObject* const* a, Py_ssize_t na) {
  return stack_launch((launcher*)self, a, na, 0);
}

PyObject* fast_launch_now(PyObject* self, PyObject* const* a, Py_ssize_t na) {
  return stack_launch((launcher*)self, a, na, 1);
}
