// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* Completion queues drained in C: each record's handler is popped from the package's {token: handler} dict and called
 * with (code, cuda_result) on this thread (the GIL held, as in the ctypes drain; cuasync's own threads never run
 * Python). queue_drain does not wait for the GPU: it is called with the GIL held.
 *
 *   drain(queue_handle, handlers) -> handlers run: until a call returns fewer records than asked for (the fd protocol)
 *   take_one(queue_handle, handlers) -> records taken (0 or 1): the oldest record alone (the fd stays readable)
 *   poll_one(queue_handle, handlers) -> the same, through queue_poll where the library has it (ABI 1.7): this thread
 *       makes the engine's pass first (when no other is running), so a completion it finds needs no hand-over
 *
 *   stream_order(stream_handle, producer_handle) -> 0 | BUSY
 *       makes a stream wait, on the device, for the work enqueued so far on another (a pooled event recorded there,
 *       waited on here, given back): three calls of the table in one. BUSY (nothing done): a staged copy still holds
 *       the producer, the package retries as it does without this module.
 *
 * A handler that raises does not stop the others of its batch (their records are already taken): the first exception
 * is raised once the batch has run. */
#include "fast.h"  // Python.h before any system header

#include <string.h>

#define CAPACITY 64

/* Runs the handlers of `count` records; returns how many ran, -1 with the first exception set. */
static Py_ssize_t run_records(const cuasync_completion_record* records, size_t count, PyObject* handlers) {
  Py_ssize_t ran = 0;
  PyObject *et = NULL, *ev = NULL, *tb = NULL;
  for (size_t i = 0; i < count; ++i) {
    PyObject* key = PyLong_FromUnsignedLongLong(records[i].token);
    if (!key) return -1;
    PyObject* handler = PyDict_GetItemWithError(handlers, key);  // borrowed
    if (!handler) {
      Py_DECREF(key);
      if (PyErr_Occurred()) return -1;
      continue;  // forgotten: its operation was abandoned
    }
    Py_INCREF(handler);
    int removed = PyDict_DelItem(handlers, key);
    Py_DECREF(key);
    PyObject* r = removed < 0 ? NULL : PyObject_CallFunction(handler, "ii", (int)records[i].code,
                                                             records[i].cuda_result);
    Py_DECREF(handler);
    if (r) {
      Py_DECREF(r);
      ++ran;
    } else if (!et) {
      PyErr_Fetch(&et, &ev, &tb);
    } else {
      PyErr_Clear();  // the first exception is the one raised
    }
  }
  if (et) {
    PyErr_Restore(et, ev, tb);
    return -1;
  }
  return ran;
}

/* `poll`: queue_poll (ABI 1.7: a look for finished work on this thread first) where the library has it. */
static PyObject* drain_records(PyObject* a, size_t capacity, int loop, int poll) {
  unsigned long long queue;
  PyObject* handlers;
  if (!PyArg_ParseTuple(a, "KO!", &queue, &PyDict_Type, &handlers)) return NULL;
  if (!fast_require_api()) return NULL;
  cuasync_completion_record records[CAPACITY];
  cuasync_queue_drain_args args;
  Py_ssize_t total = 0;
  for (;;) {
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.queue = (cuasync_queue)(uintptr_t)queue;
    args.records = records;
    args.capacity = capacity;
    const int looks = poll && fast_api->struct_size >= CUASYNC_API_SIZE_1_7;
    cuasync_error* err = looks ? fast_api->queue_poll(&args) : fast_api->queue_drain(&args);
    if (err) return fast_raise(looks ? "queue_poll" : "queue_drain", err);
    Py_ssize_t ran = run_records(records, args.count, handlers);
    if (ran < 0) return NULL;
    total += loop ? ran : (Py_ssize_t)args.count;
    if (!loop || args.count < capacity) return PyLong_FromSsize_t(total);
  }
}

static PyObject* fast_drain(PyObject* self, PyObject* a) {
  (void)self;
  return drain_records(a, CAPACITY, 1, 0);
}

static PyObject* fast_take_one(PyObject* self, PyObject* a) {
  (void)self;
  return drain_records(a, 1, 0, 0);
}

static PyObject* fast_poll_one(PyObject* self, PyObject* a) {
  (void)self;
  return drain_records(a, 1, 0, 1);
}

static PyObject* fast_stream_order(PyObject* self, PyObject* a) {
  unsigned long long stream, producer;
  (void)self;
  if (!PyArg_ParseTuple(a, "KK:stream_order", &stream, &producer)) return NULL;
  if (!fast_require_api()) return NULL;
  cuasync_event_record_args record = {sizeof record, (cuasync_stream)(uintptr_t)producer, NULL};
  cuasync_error* err = fast_api->event_record(&record);
  if (err) {
    cuasync_error_info_args info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    info.error = err;
    fast_api->error_info(&info);
    if (info.code == CUASYNC_ERROR_BUSY) {
      fast_api->error_destroy(err);
      return PyLong_FromLong(CUASYNC_ERROR_BUSY);
    }
    return fast_raise("event_record", err);
  }
  cuasync_event_wait_args wait = {sizeof wait, record.event, (cuasync_stream)(uintptr_t)stream};
  err = fast_api->event_wait(&wait);
  cuasync_event_destroy_args destroy = {sizeof destroy, record.event};
  cuasync_error* destroy_err = fast_api->event_destroy(&destroy);
  if (err) {
    fast_api->error_destroy(destroy_err);
    return fast_raise("event_wait", err);
  }
  if (destroy_err) return fast_raise("event_destroy", destroy_err);
  return PyLong_FromLong(0);
}

static PyMethodDef queue_methods[] = {
    {"stream_order", fast_stream_order, METH_VARARGS, "stream_order(stream, producer) -> 0 | BUSY"},
    {"drain", fast_drain, METH_VARARGS, "drain(queue_handle, handlers) -> handlers run"},
    {"take_one", fast_take_one, METH_VARARGS, "take_one(queue_handle, handlers) -> records taken (0 or 1)"},
    {"poll_one", fast_poll_one, METH_VARARGS,
     "poll_one(queue_handle, handlers) -> records taken (0 or 1): take_one after a look for finished work (ABI 1.7)"},
    {NULL, NULL, 0, NULL}};

int fast_add_queue(PyObject* module) { return PyModule_AddFunctions(module, queue_methods); }
