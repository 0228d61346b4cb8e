// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* cuasync._fast: module init and bind(). See fast.h. */
#include "fast.h"

const cuasync_api* fast_api = NULL;
PyObject* fast_buffer_type = NULL;
PyObject* fast_raise_error = NULL;

int fast_require_api(void) {
  if (fast_api) return 1;
  PyErr_SetString(PyExc_RuntimeError, "cuasync._fast: bind() has not been called");
  return 0;
}

PyObject* fast_raise(const char* call, cuasync_error* err) {
  PyObject* r = PyObject_CallFunction(fast_raise_error, "sK", call, (unsigned long long)(uintptr_t)err);
  Py_XDECREF(r);  /* the raiser always raises; a raiser that returned leaves no exception: say so */
  if (!PyErr_Occurred()) PyErr_Format(PyExc_RuntimeError, "cuasync._fast: %s failed", call);
  return NULL;
}

/* bind(api_address, buffer_type, raise_error): the function table (`const cuasync_api*` as an int, from the package's
 * loader), the cuasync Buffer class (recognized exactly, not its subclasses) and the error raiser. Once per process;
 * binding again replaces all three. */
static PyObject* fast_bind(PyObject* self, PyObject* args) {
  unsigned long long address;
  PyObject *buffer_type, *raise_error;
  (void)self;
  if (!PyArg_ParseTuple(args, "KOO:bind", &address, &buffer_type, &raise_error)) return NULL;
  if (!address) {
    PyErr_SetString(PyExc_ValueError, "cuasync._fast.bind: the table's address is 0");
    return NULL;
  }
  if (!PyType_Check(buffer_type) || !PyCallable_Check(raise_error)) {
    PyErr_SetString(PyExc_TypeError, "cuasync._fast.bind: expected (int, the Buffer class, a callable)");
    return NULL;
  }
  const cuasync_api* api = (const cuasync_api*)(uintptr_t)address;
  if (api->abi_major != CUASYNC_ABI_MAJOR || api->struct_size < CUASYNC_API_SIZE_1_0) {
    PyErr_Format(PyExc_ValueError, "cuasync._fast.bind: the table is ABI %u (size %zu), not %d.x", api->abi_major,
                 api->struct_size, CUASYNC_ABI_MAJOR);
    return NULL;
  }
  Py_INCREF(buffer_type);
  Py_INCREF(raise_error);
  PyObject *old_type = fast_buffer_type, *old_raise = fast_raise_error;
  fast_buffer_type = buffer_type;
  fast_raise_error = raise_error;
  Py_XDECREF(old_type);
  Py_XDECREF(old_raise);
  fast_api = api;
  Py_RETURN_NONE;
}

static PyMethodDef fast_methods[] = {
    {"bind", fast_bind, METH_VARARGS, "bind(api_address, buffer_type, raise_error): the table this module calls."},
    {"set_dtype_codes", fast_set_dtype_codes, METH_O,
     "set_dtype_codes(dict): the package's {dtype: element type code or None}, read for typed launches."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef fast_module = {
    PyModuleDef_HEAD_INIT, "cuasync._fast",
    "cuasync's compiled fast path (stable ABI): prepared launches, completion drains, DLPack's C exchange API.", -1,
    fast_methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fast(void) {
  PyObject* m = PyModule_Create(&fast_module);
  if (!m) return NULL;
  if (fast_add_launch(m) < 0 || fast_add_queue(m) < 0 || fast_add_dlpack(m) < 0 ||
      PyModule_AddIntConstant(m, "ABI_MAJOR", CUASYNC_ABI_MAJOR) < 0 ||
      PyModule_AddIntConstant(m, "LIMITED_API", Py_LIMITED_API) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
