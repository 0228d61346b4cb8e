// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* A launch's values converted as the package's ctypes packer converts them (fast.h declares them): configuration
 * dimensions, ints and floats at their parameter's size, cuasync Buffers and a framework's device memory. Each
 * returns 1 (converted) or 0 (not here, no Python error set: the package's general path converts or refuses it with
 * its message). */
#include "fast.h"  // Python.h before any system header

#include <math.h>
#include <string.h>

#define DIM_END (1LL << 31)

static PyObject* s_ptr;
static PyObject* s_parent;
static PyObject* s_handle;
static PyObject* s_data_ptr;
static PyObject* s_cai;
static PyObject* s_is_cuda;
static PyObject* s_streams;
static PyObject* s_dtype;
static PyObject* dtype_codes;  /* the package's {dtype: code or None}, shared (set_dtype_codes) */

int fast_args_init(void) {
  return (s_ptr = PyUnicode_InternFromString("ptr")) && (s_parent = PyUnicode_InternFromString("_parent")) &&
                 (s_handle = PyUnicode_InternFromString("handle")) &&
                 (s_data_ptr = PyUnicode_InternFromString("data_ptr")) &&
                 (s_cai = PyUnicode_InternFromString("__cuda_array_interface__")) &&
                 (s_is_cuda = PyUnicode_InternFromString("is_cuda")) &&
                 (s_streams = PyUnicode_InternFromString("_streams")) &&
                 (s_dtype = PyUnicode_InternFromString("dtype"))
             ? 0
             : -1;
}

/* 1: converted; 0: not here (no error set: the package's general path decides). */
int fast_dims(PyObject* d, uint32_t out[3]) {
  out[0] = out[1] = out[2] = 1;
  if (PyLong_CheckExact(d)) {
    long long v = PyLong_AsLongLong(d);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    if (v < 1 || v >= DIM_END) return 0;
    out[0] = (uint32_t)v;
    return 1;
  }
  if (!PyTuple_CheckExact(d)) return 0;
  Py_ssize_t n = PyTuple_Size(d);
  if (n > 3) return 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = PyTuple_GetItem(d, i);
    if (!PyLong_CheckExact(x)) return 0;
    long long v = PyLong_AsLongLong(x);
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    if (v < 1 || v >= DIM_END) return 0;
    out[i] = (uint32_t)v;
  }
  return 1;
}

/* An int at `size` bytes, as the package packs it: negative values signed, others unsigned, range-checked. */
int fast_pack_int(PyObject* v, uint32_t size, uint64_t* out) {
  if (size != 1 && size != 2 && size != 4 && size != 8) return 0;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  if (overflow > 0) {
    if (size != 8) return 0;
    unsigned long long u = PyLong_AsUnsignedLongLong(v);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      return 0;
    }
    *out = u;
    return 1;
  }
  if (overflow < 0) return 0;
  if (size < 8) {
    long long bits = 8LL * size;
    if (x < 0 ? x < -(1LL << (bits - 1)) : x >= (1LL << bits)) return 0;
  }
  *out = (uint64_t)x;  // little-endian: the parameter's `size` bytes are the slot's first
  return 1;
}

int fast_pack_float(PyObject* v, uint32_t size, uint64_t* out) {
  double d = PyFloat_AsDouble(v);  // an int too (a typed float parameter): one too large for a double fails here
  if (d == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  if (size == 8) {
    memcpy(out, &d, 8);
    return 1;
  }
  if (size == 4) {
    float f = (float)d;
    if (isinf(f) && !isinf(d)) return 0;  // out of a float's range: the package raises
    memcpy(out, &f, 4);
    return 1;
  }
  return 0;  // a half: the package packs it
}

static int as_address(PyObject* v, uint64_t* out) {
  unsigned long long a = PyLong_AsUnsignedLongLong(v);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  *out = a;
  return 1;
}

/* A cuasync Buffer's address; 0 for a freed one (the package raises StaleHandleError). `*noted` is 1 when the
 * buffer's last use was on `stream` already (Buffer.note_use would do nothing). */
int fast_buffer_address(PyObject* v, PyObject* stream, uint64_t* out, int* noted) {
  PyObject* parent = PyObject_GetAttr(v, s_parent);
  if (!parent) {
    PyErr_Clear();
    return 0;
  }
  PyObject* owner = parent != Py_None ? parent : v;
  PyObject* handle = PyObject_GetAttr(owner, s_handle);
  PyObject* streams = handle ? PyObject_GetAttr(owner, s_streams) : NULL;
  Py_DECREF(parent);
  int alive = handle ? PyObject_IsTrue(handle) : -1;
  Py_XDECREF(handle);
  *noted = streams && PyList_Check(streams) && PyList_Size(streams) > 0 &&
           PyList_GetItem(streams, PyList_Size(streams) - 1) == stream;
  Py_XDECREF(streams);
  if (alive != 1) {
    PyErr_Clear();
    return 0;
  }
  PyObject* ptr = PyObject_GetAttr(v, s_ptr);
  if (!ptr) {
    PyErr_Clear();
    return 0;
  }
  int ok = as_address(ptr, out);
  Py_DECREF(ptr);
  return ok;
}

PyObject* fast_set_dtype_codes(PyObject* self, PyObject* dict) {
  (void)self;
  if (!PyDict_Check(dict)) {
    PyErr_SetString(PyExc_TypeError, "set_dtype_codes: expected a dict");
    return NULL;
  }
  PyObject* old = dtype_codes;
  Py_INCREF(dict);
  dtype_codes = dict;
  Py_XDECREF(old);
  Py_RETURN_NONE;
}

uint32_t fast_dtype_code(PyObject* dtype) {
  if (!dtype_codes) return 0;
  PyObject* code = PyDict_GetItemWithError(dtype_codes, dtype);  // borrowed
  if (!code) {
    PyErr_Clear();  // absent or unhashable
    return 0;
  }
  unsigned long c = PyLong_Check(code) ? PyLong_AsUnsignedLong(code) : 0;
  if (PyErr_Occurred()) PyErr_Clear();
  return (uint32_t)c;
}

/* The element code of a DLPack dtype (lanes 1), 0 when it has none here: bfloat16 is a 2-byte float, as in the
 * package. */
static uint32_t dlpack_element(cuasync_dl_data_type t) {
  if (t.lanes != 1 || t.bits % 8 || t.bits == 0 || t.bits > 64) return 0;
  switch (t.code) {
    case 0:
    case 1: return CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_INTEGER, t.bits / 8, 0);
    case 2:
    case 4: return CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_FLOAT, t.bits / 8, 0);
    case 6: return CUASYNC_ARG_BOOL;
    default: return 0;
  }
}

/* The element code of an array-interface typestr ("<f4"), 0 when it has none here. */
static uint32_t typestr_element(PyObject* typestr) {
  if (!typestr || !PyUnicode_Check(typestr) || PyUnicode_GetLength(typestr) != 3) return 0;
  const Py_UCS4 k = PyUnicode_ReadChar(typestr, 1), d = PyUnicode_ReadChar(typestr, 2);
  if (PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  if (d < '1' || d > '8') return 0;
  const unsigned n = (unsigned)(d - '0');
  switch (k) {
    case 'i':
    case 'u': return CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_INTEGER, n, 0);
    case 'f': return CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_FLOAT, n, 0);
    case 'b': return CUASYNC_ARG_BOOL;
    default: return 0;
  }
}

/* A framework's device address: the DLPack C exchange API, data_ptr(), or the CUDA array interface. `*producer` gets a
 * new reference: the stream to order after (an int), None, or False (the package tells); `producer` NULL: not asked
 * (an untracked launch, whose framework orders its own streams: no current_work_stream call). */
int fast_foreign_address(PyObject* v, uint64_t* out, PyObject** producer, uint32_t* element) {
  const fast_dlpack_exchange_api* x = fast_exchange_api(v);
  if (!x && PyErr_Occurred()) PyErr_Clear();
  if (x && x->dltensor_from_py_object_no_sync) {
    cuasync_dl_tensor t;
    if (x->dltensor_from_py_object_no_sync(v, &t) == 0) {
      if (t.device.device_type == CUASYNC_DL_CPU) return 0;  // host memory: the package refuses it unless pinned
      *out = (uint64_t)(uintptr_t)t.data + t.byte_offset;
      if (element) *element = dlpack_element(t.dtype);
      if (!producer) return 1;
      void* stream = NULL;
      if ((t.device.device_type == CUASYNC_DL_CUDA || t.device.device_type == CUASYNC_DL_CUDA_MANAGED) &&
          x->current_work_stream &&
          x->current_work_stream(t.device.device_type, t.device.device_id, &stream) == 0) {
        *producer = PyLong_FromVoidPtr(stream);
      } else {
        PyErr_Clear();
        *producer = Py_None;
        Py_INCREF(Py_None);
      }
      return *producer != NULL;
    }
    PyErr_Clear();
  }
  PyObject* data_ptr = PyObject_GetAttr(v, s_data_ptr);
  if (data_ptr) {
    PyObject* is_cuda = PyObject_GetAttr(v, s_is_cuda);  // a host tensor: the package refuses or takes it (pinned)
    if (!is_cuda) PyErr_Clear();
    int host = is_cuda == Py_False;
    Py_XDECREF(is_cuda);
    if (host) {
      Py_DECREF(data_ptr);
      return 0;
    }
    PyObject* r = PyCallable_Check(data_ptr) ? PyObject_CallObject(data_ptr, NULL) : NULL;
    Py_DECREF(data_ptr);
    int ok = r && PyLong_Check(r) && as_address(r, out);
    Py_XDECREF(r);
    if (!ok) {
      PyErr_Clear();
      return 0;
    }
    if (element) {  // a tensor's dtype, through the package's table
      PyObject* dtype = PyObject_GetAttr(v, s_dtype);
      *element = dtype ? fast_dtype_code(dtype) : 0;
      if (!dtype) PyErr_Clear();
      Py_XDECREF(dtype);
    }
    if (producer) {
      *producer = Py_False;
      Py_INCREF(Py_False);
    }
    return 1;
  }
  PyErr_Clear();
  PyObject* cai = PyObject_GetAttr(v, s_cai);
  if (!cai) {
    PyErr_Clear();
    return 0;
  }
  int ok = 0;
  if (PyDict_Check(cai)) {
    PyObject* data = PyDict_GetItemString(cai, "data");  // borrowed
    if (data && PyTuple_Check(data) && PyTuple_Size(data) >= 1 && as_address(PyTuple_GetItem(data, 0), out)) {
      PyObject* stream = PyDict_GetItemString(cai, "stream");  // borrowed; absent: nothing to order
      if (producer) {
        *producer = stream ? stream : Py_None;
        Py_INCREF(*producer);
      }
      if (element) *element = typestr_element(PyDict_GetItemString(cai, "typestr"));
      ok = 1;
    }
  }
  Py_DECREF(cai);
  return ok;
}
