// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* The DLPack C exchange API (DLPack 1.3), as a consumer: a producer's type carries `__dlpack_c_exchange_api__`, a
 * capsule named "dlpack_exchange_api" (an int address is taken too) holding a table of C functions that describe one
 * of its tensors without a Python call: 30-80 ns, against 0.2-1 us for `__dlpack__` and its capsule. Neither function
 * used here synchronizes: the consumer orders its stream after the producer's current work stream itself.
 *
 *   exchange_version(obj) -> (major, minor) | None
 *   dlpack_import(obj) -> None | (managed address, device_type, device_id, current work stream | None,
 *                                 (code, bits, lanes), shape, flags)
 *       an owning DLManagedTensorVersioned of `obj` (managed_tensor_from_py_object_no_sync): the caller owns it and
 *       deletes it once (delete_managed), or hands it to cuasync's buffer_import_dlpack.
 *   delete_managed(address): calls the tensor's deleter (with the GIL held: a producer's deleter may take it).
 *   time_exchange(obj, count) -> (ns per owning import + delete, ns per borrowed describe | None): the exchange's own
 *       cost, measured in C. */
#include "fast.h"  // Python.h first: it sets the feature macros clock_gettime needs

#include <time.h>

#define CACHE 8

static struct {
  PyObject* type;  // a strong reference: a cached type never goes away while it is here
  const fast_dlpack_exchange_api* api;
} cache[CACHE];
static unsigned next_slot;

static const fast_dlpack_exchange_api* lookup(PyObject* type) {
  PyObject* attr = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
  if (!attr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    return NULL;
  }
  const fast_dlpack_exchange_header* h = NULL;
  if (PyCapsule_CheckExact(attr)) {
    h = PyCapsule_GetPointer(attr, "dlpack_exchange_api");
  } else if (PyLong_Check(attr)) {
    h = PyLong_AsVoidPtr(attr);
  }
  Py_DECREF(attr);
  if (!h) {
    PyErr_Clear();  // another name or kind of object: not an exchange API this consumer knows
    return NULL;
  }
  while (h && h->version.major != 1) h = h->prev_api;  // a newer major may chain the 1.x table
  const fast_dlpack_exchange_api* api = (const fast_dlpack_exchange_api*)h;
  if (api && (!api->managed_tensor_from_py_object_no_sync || !api->current_work_stream)) return NULL;
  return api;
}

const fast_dlpack_exchange_api* fast_exchange_api(PyObject* obj) {
  PyObject* type = (PyObject*)Py_TYPE(obj);
  for (unsigned i = 0; i < CACHE; ++i) {
    if (cache[i].type == type) return cache[i].api;
  }
  const fast_dlpack_exchange_api* api = lookup(type);
  if (PyErr_Occurred()) return NULL;
  unsigned slot = next_slot++ % CACHE;
  Py_INCREF(type);
  PyObject* old = cache[slot].type;
  cache[slot].type = type;
  cache[slot].api = api;
  Py_XDECREF(old);
  return api;
}

static PyObject* fast_exchange_version(PyObject* self, PyObject* obj) {
  (void)self;
  const fast_dlpack_exchange_api* api = fast_exchange_api(obj);
  if (!api) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  return Py_BuildValue("(II)", api->header.version.major, api->header.version.minor);
}

static PyObject* fast_dlpack_import(PyObject* self, PyObject* obj) {
  (void)self;
  const fast_dlpack_exchange_api* api = fast_exchange_api(obj);
  if (!api) {
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
  }
  cuasync_dl_managed_tensor_versioned* m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0 || !m) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_BufferError, "the producer's DLPack exchange API gave no tensor");
    return NULL;
  }
  const cuasync_dl_tensor* t = &m->dl_tensor;
  PyObject* stream = NULL;
  void* s = NULL;
  if (t->device.device_type == CUASYNC_DL_CUDA || t->device.device_type == CUASYNC_DL_CUDA_MANAGED) {
    if (api->current_work_stream(t->device.device_type, t->device.device_id, &s) != 0) goto fail;
    stream = PyLong_FromVoidPtr(s);
  } else {
    stream = Py_None;
    Py_INCREF(Py_None);
  }
  PyObject* shape = stream ? PyTuple_New(t->ndim) : NULL;
  if (!shape) goto fail_stream;
  for (int32_t i = 0; i < t->ndim; ++i) {
    PyObject* x = PyLong_FromLongLong(t->shape[i]);
    if (!x) {
      Py_DECREF(shape);
      goto fail_stream;
    }
    PyTuple_SetItem(shape, i, x);
  }
  PyObject* r = Py_BuildValue("(KiiN(iii)NK)", (unsigned long long)(uintptr_t)m, (int)t->device.device_type,
                              (int)t->device.device_id, stream, (int)t->dtype.code, (int)t->dtype.bits,
                              (int)t->dtype.lanes, shape, (unsigned long long)m->flags);
  if (!r && m->deleter) m->deleter(m);
  return r;
fail_stream:
  Py_XDECREF(stream);
fail:
  if (m->deleter) m->deleter(m);
  return NULL;
}

static PyObject* fast_delete_managed(PyObject* self, PyObject* arg) {
  (void)self;
  void* p = PyLong_AsVoidPtr(arg);
  if (!p) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "delete_managed: address 0");
    return NULL;
  }
  cuasync_dl_managed_tensor_versioned* m = p;
  if (m->deleter) m->deleter(m);
  Py_RETURN_NONE;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static PyObject* fast_time_exchange(PyObject* self, PyObject* a) {
  PyObject* obj;
  Py_ssize_t count;
  (void)self;
  if (!PyArg_ParseTuple(a, "On:time_exchange", &obj, &count)) return NULL;
  if (count < 1) count = 1;
  const fast_dlpack_exchange_api* api = fast_exchange_api(obj);
  if (!api) {
    if (PyErr_Occurred()) return NULL;
    PyErr_SetString(PyExc_TypeError, "time_exchange: the object's type has no DLPack C exchange API");
    return NULL;
  }
  double t0 = now_ns();
  for (Py_ssize_t i = 0; i < count; ++i) {
    cuasync_dl_managed_tensor_versioned* m = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0) return NULL;
    if (m && m->deleter) m->deleter(m);
  }
  double owning = (now_ns() - t0) / (double)count;
  if (!api->dltensor_from_py_object_no_sync) return Py_BuildValue("(dO)", owning, Py_None);
  t0 = now_ns();
  for (Py_ssize_t i = 0; i < count; ++i) {
    cuasync_dl_tensor t;
    if (api->dltensor_from_py_object_no_sync(obj, &t) != 0) return NULL;
  }
  return Py_BuildValue("(dd)", owning, (now_ns() - t0) / (double)count);
}

static PyMethodDef dlpack_methods[] = {
    {"exchange_version", fast_exchange_version, METH_O, "exchange_version(obj) -> (major, minor) | None"},
    {"dlpack_import", fast_dlpack_import, METH_O, "dlpack_import(obj) -> None | (managed, device_type, ...)"},
    {"delete_managed", fast_delete_managed, METH_O, "delete_managed(address): the tensor's deleter, once"},
    {"time_exchange", fast_time_exchange, METH_VARARGS, "time_exchange(obj, count) -> (owning ns, borrowed ns)"},
    {NULL, NULL, 0, NULL}};

int fast_add_dlpack(PyObject* module) { return PyModule_AddFunctions(module, dlpack_methods); }
