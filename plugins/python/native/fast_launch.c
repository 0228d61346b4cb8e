// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* Launcher: a kernel's launch prepared once (its handle and parameter sizes), then per call only the values.
 *
 *   pack(stream, grid, block, shared_memory, flags, args) -> (blob, uses) | NotImplemented
 *       lays out one cuasync_launch_args, its kernel_arg array and the values in a new bytearray (`blob`), converting
 *       ints and floats at their parameter's size, cuasync Buffers, tensors with the DLPack C exchange API, objects
 *       with data_ptr() or __cuda_array_interface__ to their device address (fast_args.c); `stream` is the cuasync
 *       Stream, whose handle goes into the launch. `uses` is None, or (indices of the buffers whose last use was not
 *       on `stream`, foreign indices, producers) for the package to note and order before the launch: producers[k] is the CUstream
 *       (an int) that foreign argument k's producer works on (the exchange API's current work stream, or the CUDA array
 *       interface's stream), None when nothing is to be ordered, False when only the package can tell (an object with
 *       data_ptr() alone). NotImplemented: something the package's general path must handle or refuse with its
 *       message (a count or size mismatch, a value out of range, bytes, ctypes values, a freed buffer, a tensor in
 *       host memory: refused unless pinned...). With the kernel's parameter types (a C++ kernel), a value that does not
 *       fit its parameter is NotImplemented too (the package refuses it naming the parameter): an int or float for a
 *       pointer, a float for an integer, an address for a number, a tensor whose elements are not the pointee (read
 *       from the exchange API's dtype, the array interface's typestr, or `dtype` through the package's table); an
 *       int for a floating-point parameter is converted.
 *   fire(blob, queue, token) -> 0 | error address
 *       sets the blob's completion and calls the table's launch with the GIL released; a non-zero result is the
 *       cuasync_error* (the caller's to read and free).
 *   launch_untracked(stream, grid, block, shared_memory, args) -> None | buffer indices | error address | NotImplemented
 *       pack and launch in one METH_FASTCALL call, the blob on the C stack: the per-call work of cuda.core's launch
 *       (its ParamHolder packs the values, then cuLaunchKernelEx) and no Python object but the result.
 *   launch_now(stream, grid, block, shared_memory, args) -> None | error address | (blob, uses) | NotImplemented
 *       a tracked launch outside an event loop the same way, launched when nothing is to be noted or ordered first;
 *       else the blob and uses pack() would have returned (fast_call.c).
 *   bind_untracked / call_untracked: the whole of Kernel.launch_untracked in C (fast_call.c).
 *   bind_tracked / call_tracked: Kernel.launch in C, when nothing is to be ordered first: outside an event loop its
 *       Pending; in a running loop (bind_loop) its future, made after the launch reached the driver.
 * A blob belongs to one call: threads launching one kernel never share one. */
#include "fast_launcher.h"  // Python.h before any system header

#include <string.h>

static PyObject* s_handle;


/* The parts of a cuasync_arg_type that pack() looks at. */
#define POINTERS(t) ((t) >> 16 & 0xffu)
#define CLASS(t) ((t)&0xffu)
/* A pointer parameter whose pointee has a type (not void*, not a class): a tensor's elements must be of it. */
#define TYPED_POINTEE(t) (POINTERS(t) && CLASS(t) != CUASYNC_ARG_CLASS_OPAQUE && \
                          !(POINTERS(t) == 1 && CLASS(t) == CUASYNC_ARG_CLASS_VOID))
/* A non-pointer parameter that takes an address: an 8-byte integer (a CUdeviceptr) or an opaque value. */
#define TAKES_ADDRESS(t) (CLASS(t) == CUASYNC_ARG_CLASS_OPAQUE || (CLASS(t) == CUASYNC_ARG_CLASS_INTEGER && \
                                                                   ((t) >> 8 & 0xffu) == 8))


static int launcher_init(PyObject* self_, PyObject* args, PyObject* kw) {
  launcher* self = (launcher*)self_;
  unsigned long long kernel;
  PyObject* sizes;
  PyObject* types = NULL;
  (void)kw;
  if (!PyArg_ParseTuple(args, "KO!|O!:Launcher", &kernel, &PyTuple_Type, &sizes, &PyTuple_Type, &types)) return -1;
  Py_ssize_t n = PyTuple_Size(sizes);
  Py_ssize_t nt = types ? PyTuple_Size(types) : 0;
  if (nt && nt != n) {
    PyErr_SetString(PyExc_ValueError, "Launcher: one type per parameter, or none");
    return -1;
  }
  uint32_t* s = PyMem_Calloc(n ? (size_t)n : 1, sizeof(uint32_t));
  uint32_t* t = nt ? PyMem_Calloc((size_t)nt, sizeof(uint32_t)) : NULL;
  if (!s || (nt && !t)) {
    PyMem_Free(s);
    PyMem_Free(t);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; ++i) {
    unsigned long v = PyLong_AsUnsignedLong(PyTuple_GetItem(sizes, i));
    unsigned long c = t ? PyLong_AsUnsignedLong(PyTuple_GetItem(types, i)) : 0;
    if (PyErr_Occurred() || v > (1u << 20) || c > UINT32_MAX) {
      PyMem_Free(s);
      PyMem_Free(t);
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Launcher: a parameter size or type is out of range");
      return -1;
    }
    s[i] = (uint32_t)v;
    if (t) t[i] = (uint32_t)c;
  }
  PyMem_Free(self->sizes);
  PyMem_Free(self->types);
  self->kernel = kernel;
  self->n = n;
  self->sizes = s;
  self->types = t;
  return 0;
}

static void launcher_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  fast_call_clear((launcher*)self);
  PyMem_Free(((launcher*)self)->sizes);
  PyMem_Free(((launcher*)self)->types);
  PyObject_GC_Del(self);  // PyType_GenericAlloc's memory (a garbage-collected type: the kernel holds it and back)
  Py_DECREF(type);
}

/* The references bind_untracked holds (the kernel among them: kernel -> its launch_untracked -> this -> kernel). */
static int launcher_traverse(PyObject* self_, visitproc visit, void* arg) {
  launcher* self = (launcher*)self_;
  Py_VISIT(self->owner);
  Py_VISIT(self->stream_type);
  Py_VISIT(self->general);
  Py_VISIT(self->failed);
  Py_VISIT(self->tracked_general);
  Py_VISIT(self->launched);
  Py_VISIT(self->packed);
  Py_VISIT(self->collect);
  Py_VISIT(self->running_loop);
  Py_VISIT(self->queue_of);
  Py_VISIT(self->tokens);
  Py_VISIT(self->pending_type);
  Py_VISIT(self->loop_queue);
  Py_VISIT(self->loop_ref);
  Py_VISIT(self->loop_backlogs);
  Py_VISIT(Py_TYPE(self_));  // a heap type
  return 0;
}

static int launcher_clear(PyObject* self) {
  fast_call_clear((launcher*)self);
  return 0;
}

PyObject* index_tuple(const Py_ssize_t* items, Py_ssize_t n) {
  PyObject* t = PyTuple_New(n);
  if (!t) return NULL;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PyLong_FromSsize_t(items[i]);
    if (!x) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SetItem(t, i, x);
  }
  return t;
}

void uses_free(uses_t* u) {
  Py_CLEAR(u->producers);
  if (u->buffers != u->small) PyMem_Free(u->buffers);
  u->buffers = u->small;
}

#define NOT_HERE() return 0

/* One launch laid out: the header, the kernel_arg array and the values (fast_launcher.h). */
int fill(launcher* self, PyObject* stream_obj, PyObject* grid, PyObject* block, PyObject* shared_memory,
         unsigned long long flags, PyObject* args, PyObject* const* items, Py_ssize_t count, char* base,
         int ask_producers, uses_t* u) {
  u->buffers = u->small;
  u->nb = u->nf = 0;
  u->producers = NULL;
  PyObject* handle = PyObject_GetAttr(stream_obj, s_handle);
  if (!handle) return -1;
  unsigned long long stream = PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  if (PyErr_Occurred()) return -1;
  Py_ssize_t n = self->n;
  uint32_t g[3], b[3];
  long long shared = PyLong_CheckExact(shared_memory) ? PyLong_AsLongLong(shared_memory) : -1;
  if (shared == -1 && PyErr_Occurred()) PyErr_Clear();
  if ((items ? count : PyTuple_Size(args)) != n || !fast_dims(grid, g) || !fast_dims(block, b) || shared < 0 || shared > UINT32_MAX ||
      flags > UINT32_MAX) {
    return 0;
  }
  memset(base, 0, HEAD_SIZE);
  cuasync_launch_args* la = (cuasync_launch_args*)base;
  cuasync_kernel_arg* kargs = (cuasync_kernel_arg*)(base + HEAD_SIZE);
  uint64_t* values = (uint64_t*)(base + HEAD_SIZE + (size_t)n * sizeof(cuasync_kernel_arg));
  la->struct_size = sizeof(cuasync_launch_args);
  la->stream = (cuasync_stream)(uintptr_t)stream;
  la->kernel = (cuasync_kernel)(uintptr_t)self->kernel;
  memcpy(la->grid, g, sizeof g);
  memcpy(la->block, b, sizeof b);
  la->shared_memory_bytes = (uint32_t)shared;
  la->args = n ? kargs : NULL;
  la->num_args = (size_t)n;
  la->flags = (uint32_t)flags;

  if (n > 16 && !(u->buffers = PyMem_Malloc(sizeof(Py_ssize_t) * 2 * (size_t)n))) {
    u->buffers = u->small;
    PyErr_NoMemory();
    return -1;
  }
  u->foreign = u->buffers + (n > 16 ? n : 16);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = items ? items[i] : PyTuple_GetItem(args, i);
    uint32_t size = self->sizes[i];
    /* A C++ kernel's parameter type: what does not fit it goes to the package's general path, which refuses it
     * naming the parameter (0: extern "C", sizes only). */
    const uint32_t t = self->types ? self->types[i] : 0;
    values[i] = 0;
    kargs[i].value = &values[i];
    kargs[i].size = size;
    if (PyLong_CheckExact(v)) {
      if (t && POINTERS(t)) NOT_HERE();  // an int is no address
      if (t && CLASS(t) == CUASYNC_ARG_CLASS_FLOAT) {
        if (!fast_pack_float(v, size, &values[i])) NOT_HERE();  // an int for a float: converted
      } else if (!fast_pack_int(v, size, &values[i])) {
        NOT_HERE();
      }
    } else if (PyFloat_CheckExact(v)) {
      if (t && (POINTERS(t) || CLASS(t) == CUASYNC_ARG_CLASS_INTEGER || CLASS(t) == CUASYNC_ARG_CLASS_BOOL)) NOT_HERE();
      if (!fast_pack_float(v, size, &values[i])) NOT_HERE();
    } else if (v == Py_True || v == Py_False) {
      if (size != 1 && size != 2 && size != 4 && size != 8) NOT_HERE();
      if (t && (POINTERS(t) || CLASS(t) == CUASYNC_ARG_CLASS_FLOAT)) NOT_HERE();
      values[i] = v == Py_True;
    } else if (size != 8) {
      NOT_HERE();
    } else if (t && !POINTERS(t) && !TAKES_ADDRESS(t)) {
      NOT_HERE();  // an address for a number
    } else if ((PyObject*)Py_TYPE(v) == fast_buffer_type) {
      int noted = 0;
      if (!fast_buffer_address(v, stream_obj, &values[i], &noted)) NOT_HERE();
      if (!noted) u->buffers[u->nb++] = i;
    } else if (PyBytes_Check(v) || PyByteArray_Check(v)) {
      NOT_HERE();
    } else {
      PyObject* producer = NULL;
      uint32_t element = 0;
      const int typed_pointee = t && TYPED_POINTEE(t);
      if (!fast_foreign_address(v, &values[i], ask_producers ? &producer : NULL, typed_pointee ? &element : NULL)) {
        NOT_HERE();
      }
      if (typed_pointee && element + (1u << 16) != t) {  // unknown here, or another element type
        Py_XDECREF(producer);
        NOT_HERE();
      }
      if (!ask_producers) continue;
      if (!u->producers && !(u->producers = PyList_New(0))) {
        Py_DECREF(producer);
        return -1;
      }
      int r = PyList_Append(u->producers, producer);
      Py_DECREF(producer);
      if (r < 0) return -1;
      u->foreign[u->nf++] = i;
    }
  }
  return 1;
}

/* The Python value of what a launch has the package note: None, or (buffer indices, foreign indices, producers). */
PyObject* uses_value(const uses_t* u) {
  if (!u->nb && !u->nf) Py_RETURN_NONE;
  PyObject* bt = index_tuple(u->buffers, u->nb);
  PyObject* ft = index_tuple(u->foreign, u->nf);
  PyObject* pt = u->producers ? PyList_AsTuple(u->producers) : PyTuple_New(0);
  PyObject* r = (bt && ft && pt) ? PyTuple_Pack(3, bt, ft, pt) : NULL;
  Py_XDECREF(bt);
  Py_XDECREF(ft);
  Py_XDECREF(pt);
  return r;
}

static PyObject* launcher_pack(PyObject* self_, PyObject* a) {
  launcher* self = (launcher*)self_;
  unsigned long long flags;
  PyObject *stream_obj, *grid, *block, *shared_memory, *args;
  if (!PyArg_ParseTuple(a, "OOOOKO!:pack", &stream_obj, &grid, &block, &shared_memory, &flags, &PyTuple_Type,
                        &args)) {
    return NULL;
  }
  PyObject* blob = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)BLOB_SIZE(self->n));
  if (!blob) return NULL;
  uses_t u;
  int r = fill(self, stream_obj, grid, block, shared_memory, flags, args, NULL, 0, PyByteArray_AsString(blob), 1, &u);
  PyObject* uses = r == 1 ? uses_value(&u) : NULL;
  uses_free(&u);
  PyObject* result = NULL;
  if (uses) {
    result = PyTuple_Pack(2, blob, uses);
    Py_DECREF(uses);
  } else if (r == 0 && !PyErr_Occurred()) {
    result = Py_NotImplemented;
    Py_INCREF(result);
  }
  Py_DECREF(blob);
  return result;
}

static PyObject* launcher_fire(PyObject* self, PyObject* a) {
  PyObject* blob;
  unsigned long long queue, token;
  (void)self;
  if (!PyArg_ParseTuple(a, "O!KK:fire", &PyByteArray_Type, &blob, &queue, &token)) return NULL;
  if (!fast_require_api()) return NULL;
  char* base = PyByteArray_AsString(blob);
  Py_ssize_t size = PyByteArray_Size(blob);
  cuasync_launch_args* la = (cuasync_launch_args*)base;
  // Only a blob pack() made: its argument array right after the header, its size matching.
  if ((size_t)size < HEAD_SIZE || la->struct_size != sizeof(cuasync_launch_args) ||
      (size_t)size != BLOB_SIZE(la->num_args) || (la->num_args && (char*)la->args != base + HEAD_SIZE)) {
    PyErr_SetString(PyExc_ValueError, "Launcher.fire: not a blob made by Launcher.pack");
    return NULL;
  }
  la->completion.queue = (cuasync_queue)(uintptr_t)queue;
  la->completion.token = token;
  cuasync_error* err;
  Py_BEGIN_ALLOW_THREADS
  err = fast_api->launch(la);
  Py_END_ALLOW_THREADS
  if (!err) return PyLong_FromLong(0);
  return PyLong_FromVoidPtr(err);
}

static PyMethodDef launcher_methods[] = {
    {"pack", launcher_pack, METH_VARARGS,
     "pack(stream, grid, block, shared_memory, flags, args) -> (blob, uses) | NotImplemented"},
    {"fire", launcher_fire, METH_VARARGS, "fire(blob, queue, token) -> 0 | cuasync_error address"},
    {"launch_untracked", (PyCFunction)(void (*)(void))fast_launch_untracked, METH_FASTCALL,
     "launch_untracked(stream, grid, block, shared_memory, args) -> None | buffer indices | error address | "
     "NotImplemented"},
    {"launch_now", (PyCFunction)(void (*)(void))fast_launch_now, METH_FASTCALL,
     "launch_now(stream, grid, block, shared_memory, args) -> None | error address | (blob, uses) | NotImplemented"},
    {"bind_untracked", fast_bind_untracked, METH_VARARGS,
     "bind_untracked(kernel, stream_type, general, failed): what call_untracked falls back on"},
    {"call_untracked", (PyCFunction)(void (*)(void))fast_call_untracked, METH_FASTCALL | METH_KEYWORDS,
     "call_untracked(stream, grid, block, *args, shared_memory=0): Kernel.launch_untracked in C"},
    {"bind_tracked", fast_bind_tracked, METH_VARARGS,
     "bind_tracked(general, launched, packed, running_loop, collect): what call_tracked falls back on and ends with"},
    {"bind_loop", fast_bind_loop, METH_VARARGS,
     "bind_loop(queue_of, tokens): how call_tracked issues a launch in a running loop before any Python runs"},
    {"bind_pending", fast_bind_pending, METH_VARARGS,
     "bind_pending(pending_type): call_tracked makes a launch's Pending (slots _stream, what, _state, _probe) in C"},
    {"call_tracked", (PyCFunction)(void (*)(void))fast_call_tracked, METH_FASTCALL | METH_KEYWORDS,
     "call_tracked(stream, grid, block, *args, shared_memory=0): Kernel.launch in C (its Pending, or in a running loop its future)"},
    {NULL, NULL, 0, NULL}};

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, "Launcher(kernel_handle, param_sizes[, param_types]): a kernel's launch, prepared once."},
    {Py_tp_init, launcher_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, launcher_dealloc},
    {Py_tp_traverse, launcher_traverse},
    {Py_tp_clear, launcher_clear},
    {Py_tp_methods, launcher_methods},
    {0, NULL}};

static PyType_Spec launcher_spec = {"cuasync._fast.Launcher", sizeof(launcher), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
                                    launcher_slots};

int fast_add_launch(PyObject* module) {
  if (fast_args_init() < 0 || !(s_handle = PyUnicode_InternFromString("handle"))) return -1;
  PyObject* type = PyType_FromSpec(&launcher_spec);
  if (!type) return -1;
  if (PyModule_AddObject(module, "Launcher", type) < 0) {
    Py_DECREF(type);
    return -1;
  }
  return 0;
}
