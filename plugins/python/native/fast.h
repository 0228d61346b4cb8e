// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* cuasync._fast: the compiled fast path of the Python package, a CPython extension on the stable ABI (abi3, Python 3.10
 * and newer: METH_FASTCALL is in it from 3.10), shared between its files. It calls libcuasync through the function table the package's ctypes loader
 * already holds (`bind(api_address, ...)`), so it links nothing of cuasync's and serves any library of ABI 1.x.
 * Everything here runs with the GIL held except the launch itself (a driver launch can block while the hardware
 * queue is full). */
#ifndef CUASYNC_PYTHON_FAST_H
#define CUASYNC_PYTHON_FAST_H

#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030A0000  /* 3.10: METH_FASTCALL is in the stable ABI */
#include <Python.h>

#include "cuasync/cuasync.h"

/* The bound table (NULL until bind()), the cuasync Buffer class, and the package's error raiser
 * `raise_error(name, error_address)` (it frees the error and raises its exception). */
extern const cuasync_api* fast_api;
extern PyObject* fast_buffer_type;
extern PyObject* fast_raise_error;

/* Sets a RuntimeError and returns NULL when bind() has not run. */
int fast_require_api(void);
/* Raises the cuasync error `err` through the package's raiser; always returns NULL. */
PyObject* fast_raise(const char* call, cuasync_error* err);

/* ---- the DLPack C exchange API (DLPack 1.3: a capsule named "dlpack_exchange_api" on a tensor's type, under
 * `__dlpack_c_exchange_api__`), declared here as the DLPack specification defines it. cuasync.h declares the tensor
 * structs themselves. */
typedef struct fast_dlpack_exchange_header {
  cuasync_dlpack_version version;
  struct fast_dlpack_exchange_header* prev_api;
} fast_dlpack_exchange_header;

typedef struct fast_dlpack_exchange_api {
  fast_dlpack_exchange_header header;
  void* managed_tensor_allocator;  /* unused here */
  int (*managed_tensor_from_py_object_no_sync)(void* py_object, cuasync_dl_managed_tensor_versioned** out);
  int (*managed_tensor_to_py_object_no_sync)(cuasync_dl_managed_tensor_versioned* tensor, void** out_py_object);
  int (*dltensor_from_py_object_no_sync)(void* py_object, cuasync_dl_tensor* out); /* may be NULL */
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_current_stream);
} fast_dlpack_exchange_api;

/* The exchange API of `obj`'s type (major version 1), or NULL when it has none (no Python error set). Cached per type;
 * NULL with an error set only on a failure of the interpreter. */
const fast_dlpack_exchange_api* fast_exchange_api(PyObject* obj);

/* A launch's values (fast_args.c): 1 converted, 0 not here (no error set). fast_args_init interns their names. */
int fast_args_init(void);
int fast_dims(PyObject* d, uint32_t out[3]);
int fast_pack_int(PyObject* v, uint32_t size, uint64_t* out);
int fast_pack_float(PyObject* v, uint32_t size, uint64_t* out);
/* A cuasync Buffer's address (0 for a freed one); `*noted`: its last use was on `stream` already. */
int fast_buffer_address(PyObject* v, PyObject* stream, uint64_t* out, int* noted);
/* A framework's device address; `*producer` (a new reference): the CUstream to order after, None, or False;
 * `producer` NULL: not asked.
 * `element` (may be NULL: not asked): the cuasync_arg_type of its elements ("<f4": CUASYNC_ARG_F32), 0 when not
 * known here (the package's general path reads the dtype). */
int fast_foreign_address(PyObject* v, uint64_t* out, PyObject** producer, uint32_t* element);
/* The element code of the framework dtype `dtype` from the package's table (set_dtype_codes), 0 when not in it. */
uint32_t fast_dtype_code(PyObject* dtype);
/* set_dtype_codes(dict): the package's {dtype: element code or None} table, which it fills as dtypes are met. */
PyObject* fast_set_dtype_codes(PyObject* self, PyObject* dict);

/* Module parts: each adds its functions or types to the module. */
int fast_add_launch(PyObject* module);
int fast_add_queue(PyObject* module);
int fast_add_dlpack(PyObject* module);

#endif
