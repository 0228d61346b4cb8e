// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
/* cuasync C ABI: what a framework (PyTorch, JAX/XLA, a game engine, a Rust or Julia runtime) loads to drive cuasync
 * across compilers and standard libraries. Pure C (C11 and C++).
 *
 * Versioning, in the manner of the PJRT C API:
 * - One exported function, cuasync_get_api(major, &api): it sets a pointer to the function table for ABI major
 *   version `major` (refused with an error when the library does not implement it). The table starts with its size and version;
 *   it is append-only within a major version: a caller may use a function only when `api->struct_size` covers it.
 * - Every call takes one arguments struct whose first field is `struct_size`, set by the caller to the size it was
 *   built with (CUASYNC_<NAME>_ARGS_SIZE, or sizeof). A library reads older (smaller) structs with the missing fields
 *   as zero, and accepts newer (larger) ones when the fields it does not know are all zero; a struct_size smaller than
 *   the struct's first version is refused (it would cut a field in two). A field added after 1.0 says the version
 *   that added it ("ABI 1.1"); a library older than that refuses it once set (CUASYNC_ERROR_UNSUPPORTED), so check
 *   api->abi_minor before relying on it.
 * - Every call returns NULL on success or a cuasync_error* that the caller frees with api->error_destroy. No C++
 *   exception crosses this boundary.
 *
 * Handles are opaque values that are never reused: a destroyed or never-created handle is refused with
 * CUASYNC_ERROR_STALE_HANDLE (not a crash). Every handle may be used from any thread.
 *
 * Completions (a copy, a launch, a wait) are delivered without a thread per wait, in one of two ways:
 * - a C callback, run on a thread of cuasync's (never a driver callback thread, never while cuasync or the driver
 *   holds a lock), in completion order per queue;
 * - a completion queue with a file descriptor (an eventfd) that is readable while (token, status) records are queued;
 *   epoll, libuv, Qt or Python's asyncio (loop.add_reader) watch it. The protocol (no lost wake-up): when the fd is
 *   readable, call queue_drain until it returns fewer records than asked for; the fd stays readable while
 *   records remain and becomes unreadable only inside the drain that returns fewer than asked for (one that found the
 *   queue empty), so a record queued after that makes it readable again. A queue whose fd is never asked for
 *   (a consumer that drains by polling, once a frame or in a loop) makes no eventfd syscalls.
 *
 * No call waits for the GPU on the caller's thread. Copies, memsets and launches take a place among the work in flight
 * first (at most 64 per stream and 500 per context by default, below what the driver's hardware queues hold;
 * runtime_admission_get and runtime_admission_set read and change a context's bounds, ABI 1.2): with no place they
 * fail with CUASYNC_ERROR_BUSY and enqueue nothing, where the driver would have blocked the caller. (An untracked
 * launch, CUASYNC_LAUNCH_UNTRACKED, takes no place: it is the caller's to keep the queue from filling.)
 *
 * Ownership and lifetime of every pointer are stated next to it. "Borrowed" pointers are read during the call only.
 *
 * Error messages name the call, the cause and what to do ("runtime_create: dlopen: CUDA_ERROR_NOT_FOUND ... Install
 * the NVIDIA driver ... or set CUASYNC_LIBCUDA"). They name cuasync's own source file, line and function only when the
 * environment variable CUASYNC_DEBUG is 1 (read at each error), for a report to cuasync's developers.
 *
 * Environment: CUASYNC_LIBCUDA and CUASYNC_LIBNVRTC name the driver and NVRTC libraries to load; CUASYNC_LOG=info or
 * debug logs to stderr which libraries were loaded, JIT cache hits and misses and fallbacks taken (log_sink_set
 * sends the lines elsewhere, ABI 1.2); CUASYNC_DEBUG=1 as above; CUASYNC_FLIGHT=1 turns the flight recorder on
 * (flight_recorder_set, ABI 1.3).
 */
#ifndef CUASYNC_H
#define CUASYNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUASYNC_ABI_MAJOR 1
#define CUASYNC_ABI_MINOR 7

/* The size of a struct up to and including `field`: what a struct of that version occupies. */
#define CUASYNC_STRUCT_SIZE(type, field) (offsetof(type, field) + sizeof(((type*)0)->field))

/* ---- errors --------------------------------------------------------------------------------------------------- */

typedef enum cuasync_error_code {
  CUASYNC_OK = 0,
  CUASYNC_ERROR_INVALID_ARGUMENT = 1,  /* bad input caught before it reached the GPU */
  CUASYNC_ERROR_STALE_HANDLE = 2,      /* a handle that was destroyed, never created, or of another kind (NULL:
                                          CUASYNC_ERROR_INVALID_ARGUMENT) */
  CUASYNC_ERROR_UNSUPPORTED = 3,       /* an ABI version, struct field or feature this library does not have */
  CUASYNC_ERROR_NO_DRIVER = 4,         /* no NVIDIA driver, its stub, no device, or a driver too old */
  CUASYNC_ERROR_CUDA = 5,              /* a CUDA driver error: see cuda_result */
  CUASYNC_ERROR_COMPILE = 6,           /* NVRTC missing or a compile error: see nvrtc_result and the message */
  CUASYNC_ERROR_OUT_OF_MEMORY = 7,
  CUASYNC_ERROR_CANCELLED = 8,         /* a completion cancelled (its GPU work goes on) */
  CUASYNC_ERROR_INTERNAL = 9,
  CUASYNC_ERROR_BUSY = 10              /* the stream (or its context) has as much work in flight as cuasync admits: the
                                          driver's queue could block the call; nothing was enqueued: retry after one of
                                          the stream's completions */
} cuasync_error_code;

typedef struct cuasync_error cuasync_error; /* opaque; owned by the caller once returned */

typedef struct cuasync_error_info_args {
  size_t struct_size;
  const cuasync_error* error; /* in: borrowed */
  cuasync_error_code code;    /* out */
  int cuda_result;            /* out: the CUresult where there is one, else 0 */
  int nvrtc_result;           /* out: the nvrtcResult where there is one, else 0 */
  const char* message;        /* out: owned by `error`, valid until it is destroyed; never NULL */
  size_t message_size;        /* out: strlen(message) */
} cuasync_error_info_args;
#define CUASYNC_ERROR_INFO_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_error_info_args, message_size)

/* ---- handles ---------------------------------------------------------------------------------------------------- */

typedef struct cuasync_runtime_t* cuasync_runtime;    /* a device's primary context (or an adopted context) with
                                                         pools of its own: see runtime_create */
typedef struct cuasync_stream_t* cuasync_stream;      /* created, or a framework's CUstream adopted */
typedef struct cuasync_event_t* cuasync_event;        /* a pooled event recorded on a stream */
typedef struct cuasync_buffer_t* cuasync_buffer;      /* device memory (stream-ordered) or pooled pinned host memory */
typedef struct cuasync_module_t* cuasync_module;      /* a compiled, loaded program */
typedef struct cuasync_kernel_t* cuasync_kernel;      /* a kernel of a module; valid while the module lives */
typedef struct cuasync_queue_t* cuasync_queue;        /* a completion queue */
typedef struct cuasync_host_token_t* cuasync_host_token; /* host work that completes a completion, like GPU work */

/* ---- completions ------------------------------------------------------------------------------------------------ */

/* One completion record, as drained from a queue or passed to a callback. */
typedef struct cuasync_completion_record {
  uint64_t token;          /* the caller's token */
  cuasync_error_code code; /* CUASYNC_OK, CUASYNC_ERROR_CUDA (e.g. an illegal address), CUASYNC_ERROR_CANCELLED... */
  int cuda_result;         /* the CUresult when code is CUASYNC_ERROR_CUDA */
} cuasync_completion_record;

typedef void (*cuasync_callback)(const cuasync_completion_record* record, void* user_data);

/* Where an operation's completion goes: to `queue` (with `token`), or to `callback(record, user_data)` on the queue's
 * callback thread (`queue` must then have been created with callbacks). Both NULL: no completion is reported (the
 * operation is still enqueued). Embedded in the operations' args structs. */
typedef struct cuasync_completion {
  cuasync_queue queue;       /* borrowed handle */
  uint64_t token;
  cuasync_callback callback; /* optional */
  void* user_data;           /* passed back untouched */
} cuasync_completion;

typedef enum cuasync_queue_flags {
  CUASYNC_QUEUE_FD = 1,        /* records are queued for completion_queue_drain; queue_fd gives the eventfd */
  CUASYNC_QUEUE_CALLBACKS = 2  /* completions with a callback run on the queue's own thread */
} cuasync_queue_flags;

typedef struct cuasync_queue_create_args {
  size_t struct_size;
  uint32_t flags;      /* in: cuasync_queue_flags, one or both */
  cuasync_queue queue; /* out: destroy with queue_destroy */
} cuasync_queue_create_args;
#define CUASYNC_QUEUE_CREATE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_queue_create_args, queue)

typedef struct cuasync_queue_destroy_args {
  size_t struct_size;
  cuasync_queue queue; /* in: records not drained and callbacks not yet run are dropped, and so are completions of
                          work still in flight (the work goes on); the call waits for a running callback to return
                          (unless called from that callback) */
} cuasync_queue_destroy_args;
#define CUASYNC_QUEUE_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_queue_destroy_args, queue)

typedef struct cuasync_queue_fd_args {
  size_t struct_size;
  cuasync_queue queue; /* in */
  int fd;              /* out: owned by the queue; readable while records are queued (from this call on: a queue
                          whose fd was never asked for is drained without eventfd syscalls); do not read or close it */
} cuasync_queue_fd_args;
#define CUASYNC_QUEUE_FD_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_queue_fd_args, fd)

typedef struct cuasync_queue_drain_args {
  size_t struct_size;
  cuasync_queue queue;                 /* in */
  cuasync_completion_record* records;  /* in: caller's array of `capacity` records, filled in completion order */
  size_t capacity;                     /* in */
  size_t count;                        /* out: records written; < capacity means the queue was empty at the end */
} cuasync_queue_drain_args;
#define CUASYNC_QUEUE_DRAIN_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_queue_drain_args, count)

/* Host tokens: host-side work that completes through the same queues and callbacks as GPU work. */
typedef struct cuasync_host_token_create_args {
  size_t struct_size;
  cuasync_completion completion; /* in: where its completion goes */
  cuasync_host_token token;      /* out: complete it once with host_token_complete */
} cuasync_host_token_create_args;
#define CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_host_token_create_args, token)

typedef struct cuasync_host_token_complete_args {
  size_t struct_size;
  cuasync_host_token token; /* in: invalid after this call */
  cuasync_error_code code;  /* in: CUASYNC_OK, or the error to report (another value is refused; the token stays) */
} cuasync_host_token_complete_args;
#define CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_host_token_complete_args, code)

/* ---- devices, runtimes, streams, events -------------------------------------------------------------------------- */

typedef struct cuasync_device_count_args {
  size_t struct_size;
  int count; /* out */
} cuasync_device_count_args;
#define CUASYNC_DEVICE_COUNT_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_device_count_args, count)

/* Makes a new runtime on every call (two calls for one device give two runtimes): each has its own stream pool,
 * pinned host memory pool and staging ring for pageable copies. What belongs to the context is shared by every runtime
 * on it: the device's primary context itself (retained by each runtime), the context's pooled events and its
 * admission bounds (runtime_admission_set on one runtime changes them for all), and the device's stream-ordered
 * memory pool. A program usually makes one runtime per device and shares it between threads. */
typedef struct cuasync_runtime_create_args {
  size_t struct_size;
  int device;              /* in: the device ordinal (its primary context, the one PyTorch, JAX and CuPy use) */
  void* context;           /* in: optional CUcontext to adopt instead (borrowed; must outlive the runtime) */
  cuasync_runtime runtime; /* out: destroy with runtime_destroy */
} cuasync_runtime_create_args;
#define CUASYNC_RUNTIME_CREATE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_runtime_create_args, runtime)

/* Destroys a runtime. Its pinned memory is freed on a cuasync thread (cuMemFreeHost waits for the whole device to be
 * idle); the call waits for that at most about a second, so it returns even while a kernel that never ends runs: what
 * is left is freed once the device is idle, or goes with the context. */
typedef struct cuasync_runtime_destroy_args {
  size_t struct_size;
  cuasync_runtime runtime; /* in: its streams, buffers and modules must be destroyed first */
} cuasync_runtime_destroy_args;
#define CUASYNC_RUNTIME_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_runtime_destroy_args, runtime)

typedef struct cuasync_stream_create_args {
  size_t struct_size;
  cuasync_runtime runtime; /* in: required to create, and to adopt CU_STREAM_LEGACY / PER_THREAD; optional for a
                              native CUstream (when given, it must be the stream's context's runtime) */
  void* native;            /* in: optional CUstream to adopt (its context is read from it, never assumed); the
                              stream must outlive the handle; NULL creates a non-blocking stream in `runtime`.
                              (void*)1 (CU_STREAM_LEGACY: PyTorch's and CuPy's default stream) or (void*)2
                              (CU_STREAM_PER_THREAD) adopts that default stream of `runtime`'s context (since 1.1;
                              work on the legacy one serializes with every blocking stream of the context). While
                              an adopted stream (or a created one whose handle stream_native gave out) is being
                              captured into a CUDA graph (torch.cuda.graph, the caller's cuStreamBeginCapture; since
                              1.2.0, issue 30), launches, memsets and pinned copies become graph nodes: no
                              admission place, no event; a completion asked for one is reported at once with
                              CUASYNC_OK, meaning "captured" (in the graph; it runs at each launch of the graph).
                              Refused there with CUASYNC_ERROR_INVALID_ARGUMENT, naming the call and stream: a
                              pageable copy (staged on the host: use pinned memory), stream_wait (nothing runs
                              now) and event_query of an event recorded in the capture. event_record there gives a point of the capture that event_wait on another
                              stream joins (a fork or join of the graph) */
  int priority;            /* in: for created streams (0: the default) */
  cuasync_stream stream;   /* out: destroy with stream_destroy (an adopted CUstream is not destroyed) */
} cuasync_stream_create_args;
#define CUASYNC_STREAM_CREATE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_stream_create_args, stream)

typedef struct cuasync_stream_destroy_args {
  size_t struct_size;
  cuasync_stream stream; /* in: the handle goes at once; a created CUstream is destroyed once the buffers allocated
                            or imported on it are freed too (any order of destruction is safe) */
} cuasync_stream_destroy_args;
#define CUASYNC_STREAM_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_stream_destroy_args, stream)

typedef struct cuasync_stream_native_args {
  size_t struct_size;
  cuasync_stream stream; /* in */
  void* native;          /* out: the CUstream (owned by the handle, or adopted) */
  void* context;         /* out: its CUcontext */
} cuasync_stream_native_args;
#define CUASYNC_STREAM_NATIVE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_stream_native_args, context)

/* Completes when everything enqueued on the stream so far has completed, the host side of its pageable copies too
 * (a device-to-host copy's bytes are in host memory; a staged copy has enqueued and finished every chunk). Never
 * blocks. */
typedef struct cuasync_stream_wait_args {
  size_t struct_size;
  cuasync_stream stream;         /* in */
  cuasync_completion completion; /* in */
} cuasync_stream_wait_args;
#define CUASYNC_STREAM_WAIT_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_stream_wait_args, completion)

/* An event after the stream's GPU work so far (pooled). It covers GPU work only: a pageable device-to-host copy's
 * bytes reach host memory after it, at the copy's completion. Refused with CUASYNC_ERROR_BUSY while a staged copy
 * holds the stream (the event would come before the chunks still to be enqueued). */
typedef struct cuasync_event_record_args {
  size_t struct_size;
  cuasync_stream stream; /* in */
  cuasync_event event;   /* out: destroy with event_destroy */
} cuasync_event_record_args;
#define CUASYNC_EVENT_RECORD_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_event_record_args, event)

typedef struct cuasync_event_query_args {
  size_t struct_size;
  cuasync_event event; /* in */
  int done;            /* out: 1 when the recorded work has completed; an error when it failed */
} cuasync_event_query_args;
#define CUASYNC_EVENT_QUERY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_event_query_args, done)

/* Makes `stream` wait (on the device, never the host) for `event`'s recorded work. */
typedef struct cuasync_event_wait_args {
  size_t struct_size;
  cuasync_event event;   /* in */
  cuasync_stream stream; /* in */
} cuasync_event_wait_args;
#define CUASYNC_EVENT_WAIT_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_event_wait_args, stream)

typedef struct cuasync_event_destroy_args {
  size_t struct_size;
  cuasync_event event; /* in: back to its pool (safe while its work runs) */
} cuasync_event_destroy_args;
#define CUASYNC_EVENT_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_event_destroy_args, event)

/* ---- memory and copies ---------------------------------------------------------------------------------------- */

typedef enum cuasync_memory_kind {
  CUASYNC_MEMORY_DEVICE = 0, /* stream-ordered device memory from the device's pool (no cuMemAlloc/cuMemFree) */
  CUASYNC_MEMORY_PINNED = 1  /* pinned host memory from the runtime's caching pool */
} cuasync_memory_kind;

typedef struct cuasync_buffer_allocate_args {
  size_t struct_size;
  cuasync_runtime runtime;  /* in */
  cuasync_stream stream;    /* in: device memory: allocated in its order (other streams' uses wait for it); a
                               stream of the runtime's context */
  uint32_t kind;            /* in: cuasync_memory_kind */
  size_t size;              /* in: bytes, > 0 */
  cuasync_buffer buffer;    /* out: free with buffer_free */
  void* pointer;            /* out: the device address (a CUdeviceptr) or the host address */
} cuasync_buffer_allocate_args;
#define CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_buffer_allocate_args, pointer)

/* Device memory: freed in the order of the stream it was allocated on (work on other streams that uses it must be
 * ordered before that, e.g. with event_wait); pinned memory: back to the pool, handed out again only after the copies
 * cuasync made with it have completed; while a staged copy holds the buffer's stream, freed once it lets go (so the
 * free follows its last chunk). The handle goes at once. Never waits on the host. */
typedef struct cuasync_buffer_free_args {
  size_t struct_size;
  cuasync_buffer buffer; /* in */
} cuasync_buffer_free_args;
#define CUASYNC_BUFFER_FREE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_buffer_free_args, buffer)

/* Copies `size` bytes from `src` to `dst` on `stream`: host to device, device to host, or device to device. Never
 * waits for the GPU, never copies pageable memory or allocates pinned memory on the calling thread: it enqueues and
 * returns. Pageable host memory never takes the driver's slow, host-waiting path. Up to 256 MiB it is enqueued
 * whole in stream order in the call: through a pooled pinned block of its size when one is idle (warm), else
 * (cold: that block is then allocated in the background for the next copy of its size) through a few pinned chunks
 * that the runtime reserved when it was created, reused in turn. The background allocation holds up every thread's
 * driver calls while it runs (~0.5 ms per MiB): `CUASYNC_WHOLE_BLOCK_UP_TO_MIB=<n>` bounds the blocks' size (0: none;
 * the chunks, and the ring once they are in use). H2D, the stream waits (on the GPU) until cuasync's
 * copy threads have copied `src` into pinned memory, then DMAs it; D2H, the DMAs into pinned memory are enqueued and
 * the copy threads copy them out before the completion. Larger copies (or any, when neither is there: the first
 * milliseconds after runtime_create, or at the pinned pool's cap) go through the staged copier's ring and hold the
 * stream until their last chunk is enqueued (other copies, memsets, launches, event records and DLPack exports'
 * handshakes on it meanwhile fail with CUASYNC_ERROR_BUSY; the stream and buffers freed on it meanwhile stay until
 * the copy is done with them). `CUASYNC_WARM_UP_STAGING=1` creates the ring with each runtime. Host memory, the
 * source included, is read or written after the call returns: reuse or free it only at the completion (H2D: the
 * data is on the device; D2H: it is in `dst`). */
typedef struct cuasync_copy_args {
  size_t struct_size;
  cuasync_stream stream;         /* in */
  void* dst;                     /* in: borrowed address (host, or a CUdeviceptr as a pointer) */
  const void* src;               /* in: borrowed address */
  size_t size;                   /* in: bytes, > 0 */
  cuasync_completion completion; /* in */
} cuasync_copy_args;
#define CUASYNC_COPY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_copy_args, completion)

typedef struct cuasync_memset_args {
  size_t struct_size;
  cuasync_stream stream;         /* in */
  void* dst;                     /* in: a device address */
  uint8_t value;                 /* in */
  size_t size;                   /* in: bytes */
  cuasync_completion completion; /* in */
} cuasync_memset_args;
#define CUASYNC_MEMSET_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_memset_args, completion)

/* ---- DLPack ------------------------------------------------------------------------------------------------------ */
/* Tensors cross frameworks as DLPack 1.x `DLManagedTensorVersioned`, taken and returned as `void*`. Its layout is
 * declared below under cuasync's own names, so that this header needs no dlpack.h and never clashes with one: the
 * structs are DLPack's field for field (the same names, types and order), and a program that includes dlpack.h (1.0
 * or newer) before this header gets a compile-time check that the two agree. Cast between them freely. */

/** DLPack's `DLPackVersion`: the version of the DLPack ABI a tensor was made for (cuasync exports 1.0). */
typedef struct cuasync_dlpack_version {
  uint32_t major; /**< 1 for every DLPack 1.x: cuasync refuses another major version on import */
  uint32_t minor; /**< added features; any minor version is accepted */
} cuasync_dlpack_version;

/** DLPack's `DLDeviceType` values cuasync meets (`kDLCPU`, `kDLCUDA`, `kDLCUDAHost`, `kDLCUDAManaged`). */
typedef enum cuasync_dl_device_type {
  CUASYNC_DL_CPU = 1,          /**< `kDLCPU`: host memory (refused on import: not device-accessible) */
  CUASYNC_DL_CUDA = 2,         /**< `kDLCUDA`: device memory */
  CUASYNC_DL_CUDA_HOST = 3,    /**< `kDLCUDAHost`: pinned host memory */
  CUASYNC_DL_CUDA_MANAGED = 13 /**< `kDLCUDAManaged`: managed (unified) memory */
} cuasync_dl_device_type;

/** DLPack's `DLDevice`. */
typedef struct cuasync_dl_device {
  int32_t device_type; /**< a cuasync_dl_device_type (`DLDeviceType`: a C enum, 32 bits on every ABI cuasync has) */
  int32_t device_id;   /**< the device ordinal */
} cuasync_dl_device;

/** DLPack's `DLDataType`. */
typedef struct cuasync_dl_data_type {
  uint8_t code;   /**< `DLDataTypeCode`: 0 int, 1 uint, 2 float, 4 bfloat, ... */
  uint8_t bits;   /**< bits per lane: 8, 16, 32, 64 */
  uint16_t lanes; /**< 1 for scalars */
} cuasync_dl_data_type;

/** DLPack's `DLTensor`. */
typedef struct cuasync_dl_tensor {
  void* data;                 /**< the allocation's start (the tensor begins at data + byte_offset) */
  cuasync_dl_device device;   /**< where the memory is */
  int32_t ndim;               /**< number of dimensions */
  cuasync_dl_data_type dtype; /**< the element type */
  int64_t* shape;             /**< ndim sizes */
  int64_t* strides;           /**< ndim strides in elements, or NULL for a contiguous row-major tensor */
  uint64_t byte_offset;       /**< where the tensor starts after `data` */
} cuasync_dl_tensor;

/** DLPack's `DLManagedTensorVersioned`: a tensor with its owner's deleter, which its consumer calls once. */
typedef struct cuasync_dl_managed_tensor_versioned {
  cuasync_dlpack_version version; /**< the DLPack version it was made for */
  void* manager_ctx;              /**< the producer's, for its deleter */
  /** Frees the tensor; called once by whoever owns it (NULL: nothing to free). */
  void (*deleter)(struct cuasync_dl_managed_tensor_versioned* self);
  uint64_t flags;                 /**< `DLPACK_FLAG_BITMASK_READ_ONLY` (1), `..._IS_COPIED` (2), ... */
  cuasync_dl_tensor dl_tensor;    /**< the tensor */
} cuasync_dl_managed_tensor_versioned;

#if defined(DLPACK_MAJOR_VERSION) && DLPACK_MAJOR_VERSION >= 1
/* dlpack.h came first: its layouts must be the ones above. */
#ifdef __cplusplus
#define CUASYNC_LAYOUT_CHECK(cond, what) static_assert(cond, what)
#else
#define CUASYNC_LAYOUT_CHECK(cond, what) _Static_assert(cond, what)
#endif
CUASYNC_LAYOUT_CHECK(sizeof(DLManagedTensorVersioned) == sizeof(cuasync_dl_managed_tensor_versioned) &&
                         offsetof(DLManagedTensorVersioned, dl_tensor) ==
                             offsetof(cuasync_dl_managed_tensor_versioned, dl_tensor) &&
                         sizeof(DLTensor) == sizeof(cuasync_dl_tensor) &&
                         offsetof(DLTensor, byte_offset) == offsetof(cuasync_dl_tensor, byte_offset) &&
                         sizeof(DLDevice) == sizeof(cuasync_dl_device) &&
                         sizeof(DLDataType) == sizeof(cuasync_dl_data_type),
                     "dlpack.h's DLManagedTensorVersioned differs from cuasync.h's declaration of it");
#undef CUASYNC_LAYOUT_CHECK
#endif

/* Imports a tensor (CUDA device, pinned host or managed memory, contiguous) as a buffer. Its deleter is called exactly
 * once: when the buffer is freed (and every tensor exported from it deleted) and the work enqueued on `stream` up to
 * then has completed (cuasync's uses of the tensor belong on `stream`), on a cuasync thread; or, with `released` set
 * (ABI 1.1), by the caller once that completion says so. */
typedef struct cuasync_buffer_import_dlpack_args {
  size_t struct_size;
  cuasync_runtime runtime; /* in: the tensor's device must be the runtime's */
  cuasync_stream stream;   /* in: where cuasync uses the tensor (the consumer's stream of the exchange) */
  void* managed;           /* in: a DLManagedTensorVersioned* (cuasync_dl_managed_tensor_versioned*); owned by cuasync
                              from a successful call on */
  cuasync_buffer buffer;   /* out: free with buffer_free */
  void* pointer;           /* out: data + byte_offset */
  size_t size;             /* out: bytes */
  cuasync_completion released; /* in (ABI 1.1): optional. Set (a queue or a callback): cuasync never calls the
                                  tensor's deleter; it delivers this completion once it no longer uses the tensor (at
                                  the moment the deleter would have run: above), with the error code if the work on
                                  `stream` failed, and from then on the caller calls the deleter (or drops its DLPack
                                  capsule) on a thread of its own, whatever the code. For runtimes whose deleters need
                                  a lock the caller's threads hold: Python's GIL (a CuPy or PyTorch deleter takes it;
                                  run on cuasync's poller thread it would stall every completion in the process behind
                                  the interpreter). Like any completion it is dropped if its queue is destroyed first.
                                  Empty (queue and callback NULL): the deleter runs on a cuasync thread, as in 1.0.
                                  A failed call delivers nothing: the tensor stays the caller's. */
} cuasync_buffer_import_dlpack_args;
#define CUASYNC_BUFFER_IMPORT_DLPACK_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_buffer_import_dlpack_args, released)

/* Exports a buffer as a DLManagedTensorVersioned (a view: the buffer's memory stays alive until the consumer calls
 * the deleter, even after buffer_free). The handshake as DLPack defines it: `consumer_stream` is the consumer's
 * stream (a CUstream; 1: the legacy default stream; 2: the per-thread default stream; -1: no synchronisation); it is
 * made to wait, on the device, for the work enqueued on `stream` so far. The host never waits. */
typedef struct cuasync_buffer_export_dlpack_args {
  size_t struct_size;
  cuasync_buffer buffer;     /* in */
  cuasync_stream stream;     /* in: the producer's stream: where the buffer's pending writes are */
  intptr_t consumer_stream;  /* in */
  uint8_t dtype_code;        /* in: DLDataTypeCode (0 int, 1 uint, 2 float, 4 bfloat...) */
  uint8_t dtype_bits;        /* in: 0 means 8 (bytes) */
  uint16_t dtype_lanes;      /* in: 0 means 1 */
  int32_t ndim;              /* in: 0 means one dimension covering the buffer */
  const int64_t* shape;      /* in: borrowed, ndim entries (contiguous, row-major) */
  void* managed;             /* out: a DLManagedTensorVersioned* (cuasync_dl_managed_tensor_versioned*) the consumer
                                owns (call its deleter once) */
} cuasync_buffer_export_dlpack_args;
#define CUASYNC_BUFFER_EXPORT_DLPACK_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_buffer_export_dlpack_args, managed)

/* ---- JIT and launches ------------------------------------------------------------------------------------------- */

typedef struct cuasync_header {
  const char* name;     /* borrowed: the include name */
  const char* contents; /* borrowed */
} cuasync_header;

/* Compiles with NVRTC for the runtime's device (through cuasync's memory and disk caches) and loads the module. */
typedef struct cuasync_compile_args {
  size_t struct_size;
  cuasync_runtime runtime;              /* in */
  const char* name;                     /* in: borrowed, the program's name in messages ("saxpy.cu") */
  const char* source;                   /* in: borrowed */
  const char* const* options;           /* in: borrowed NVRTC options ("-DN=4", "--use_fast_math") */
  size_t num_options;
  const cuasync_header* headers;        /* in: borrowed in-memory headers */
  size_t num_headers;
  const char* const* name_expressions;  /* in: borrowed ("saxpy<float>"), for kernel_get */
  size_t num_name_expressions;
  cuasync_module module;                /* out: destroy with module_destroy */
} cuasync_compile_args;
#define CUASYNC_COMPILE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_compile_args, module)

/* Loads a kernel package: a directory with a `cuasync.manifest` naming the program's source, headers, options and
 * entry points, compiled for the runtime's device through the caches. A malformed manifest is an error naming the
 * file, the line and the problem ("pack/cuasync.manifest:7: unknown entry 'kernal'").
 *
 * The manifest is text, one entry per line, fields separated by spaces; `#` starts a comment, blank lines are ignored:
 *
 *     package NAME             the package's name (first, once)
 *     source FILE              the program's source, relative to the directory (once)
 *     header FILE [as NAME]    a header compiled from memory: #include "NAME" (default NAME: FILE) finds it
 *     option TEXT...           an NVRTC option as written ("--use_fast_math", "-DN=4"); one that changes the target
 *                              (-arch, -rdc, -dlto, ...) is refused
 *     define NAME[=VALUE]      the same as option -DNAME[=VALUE]
 *     std STANDARD             c++11, c++14, c++17 or c++20 (default c++17)
 *     kernel NAME              an entry point with extern "C" linkage
 *     template EXPRESSION...   a template instantiation, compiled and found by kernel_get with that expression
 *                              ("scale<float>")
 *
 * For example:
 *
 *     package scale
 *     source scale.cu
 *     header common.cuh
 *     define BLOCK=256
 *     kernel scale_f32
 *     template scale<double>
 *
 * Files are read when the package is loaded (their contents are part of the cache key). Paths may not leave the
 * package's directory (symbolic links and `..` are resolved through the filesystem). */
typedef struct cuasync_package_load_args {
  size_t struct_size;
  cuasync_runtime runtime;  /* in */
  const char* directory;    /* in: borrowed */
  cuasync_module module;    /* out: destroy with module_destroy; kernel_get finds the manifest's entry points */
  size_t num_entry_points;  /* out: its `kernel` and `template` entries, each checked to exist */
} cuasync_package_load_args;
#define CUASYNC_PACKAGE_LOAD_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_package_load_args, num_entry_points)

typedef struct cuasync_module_destroy_args {
  size_t struct_size;
  cuasync_module module; /* in: its kernels become stale */
} cuasync_module_destroy_args;
#define CUASYNC_MODULE_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_module_destroy_args, module)

/* ABI 1.4: a kernel argument's type, given with the arguments of a launch (cuasync_launch_args.arg_types) so that a
 * kernel whose parameter types are known is checked by type as well as size: a `double*` for a `const float*`, a
 * float for an int, are refused naming the parameter. A code packs what a launch compares: bits 0-7 the class, 8-15
 * the size in bytes (of the innermost pointee for a pointer), 16-23 how many pointers deep, and bit 24, set in every
 * type (0 is CUASYNC_ARG_TYPE_NONE: no type, the size alone is checked). cv-qualifiers are not part of a type; an
 * integer's signedness and spelling (long, long long) are not told apart. An argument fits its parameter when the
 * codes are equal, or: either is of class OPAQUE (a struct, an enum, a template class) at the same pointer depth
 * (its size is checked); either is `void*` and the other a pointer; an 8-byte integer (a CUdeviceptr) or an opaque
 * value for a pointer, and a pointer for an 8-byte integer or opaque parameter. Everything else is refused. */
typedef enum cuasync_arg_class {
  CUASYNC_ARG_CLASS_OPAQUE = 0,
  CUASYNC_ARG_CLASS_VOID = 1,    /* only as a pointee: void* */
  CUASYNC_ARG_CLASS_BOOL = 2,
  CUASYNC_ARG_CLASS_INTEGER = 3,
  CUASYNC_ARG_CLASS_FLOAT = 4    /* half (2 bytes), float, double */
} cuasync_arg_class;
typedef uint32_t cuasync_arg_type;
#define CUASYNC_ARG_TYPE_NONE 0u
#define CUASYNC_ARG_TYPE(cls, size, pointers) \
  ((uint32_t)(cls) | ((uint32_t)(size) & 0xffu) << 8 | ((uint32_t)(pointers) & 0xffu) << 16 | 1u << 24)
/* The same type behind one more pointer: CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F32) is float*. */
#define CUASYNC_ARG_POINTER_TO(type) ((uint32_t)(type) + (1u << 16))
#define CUASYNC_ARG_BOOL CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_BOOL, 1, 0)
#define CUASYNC_ARG_I8 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_INTEGER, 1, 0)
#define CUASYNC_ARG_I16 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_INTEGER, 2, 0)
#define CUASYNC_ARG_I32 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_INTEGER, 4, 0)
#define CUASYNC_ARG_I64 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_INTEGER, 8, 0)
#define CUASYNC_ARG_F16 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_FLOAT, 2, 0)
#define CUASYNC_ARG_F32 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_FLOAT, 4, 0)
#define CUASYNC_ARG_F64 CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_FLOAT, 8, 0)
#define CUASYNC_ARG_VOID_POINTER CUASYNC_ARG_TYPE(CUASYNC_ARG_CLASS_VOID, 0, 1)

typedef struct cuasync_kernel_get_args {
  size_t struct_size;
  cuasync_module module; /* in */
  const char* name;      /* in: borrowed; an extern "C" name or a name expression given at compile */
  cuasync_kernel kernel; /* out: valid while the module lives (no destroy); the same handle for the same name */
  size_t num_params;     /* out: the kernel's parameter count */
  size_t* param_sizes;   /* in (ABI 1.1): optional, borrowed: the caller's array of param_sizes_capacity entries (NULL
                            with 0 asks for none); out: its first min(param_sizes_capacity, num_params) entries are
                            set to the parameters' sizes in bytes, in order, as launch checks arguments against them
                            (so that a binding can convert a Python int or float to its parameter's width); the rest
                            are left untouched */
  size_t param_sizes_capacity; /* in (ABI 1.1): entries in param_sizes; non-zero with a NULL array is refused */
  cuasync_arg_type* param_types; /* in (ABI 1.4): optional, borrowed: the caller's array of param_types_capacity
                                  entries; out: its first min(param_types_capacity, num_params) entries are set to
                                  the parameters' types (cuasync_arg_type) as launch checks them, or to
                                  CUASYNC_ARG_TYPE_NONE for a kernel whose types are not known; the rest are left
                                  untouched */
  size_t param_types_capacity; /* in (ABI 1.4): entries in param_types; non-zero with a NULL array is refused */
  const char* const* param_type_names; /* out (ABI 1.4): num_params C++ spellings of the parameter types ("const
                                          float*"), owned by the module (valid while it lives); NULL when not typed */
  uint32_t typed;              /* out (ABI 1.4): 1 when the kernel's parameter types are known (a C++ kernel: its
                                  mangled name says them) and launch checks typed arguments against them; 0 for an
                                  extern "C" kernel, or a name the decoder does not read: sizes only */
} cuasync_kernel_get_args;
#define CUASYNC_KERNEL_GET_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_kernel_get_args, typed)

/* One kernel argument: `size` bytes at `value`, checked against the kernel's parameter. */
typedef struct cuasync_kernel_arg {
  const void* value; /* borrowed, read during the call */
  size_t size;
} cuasync_kernel_arg;

/* cuasync_launch_args.flags (ABI 1.1). */
typedef enum cuasync_launch_flags {
  /* An untracked launch is checked exactly like a tracked one (argument count and sizes, the configuration), then
   * enqueued and nothing else: it takes no admission place (never CUASYNC_ERROR_BUSY), records no event, and reports
   * no completion (`completion` must be empty: queue and callback NULL). For callers that order their stream
   * themselves: a PyTorch custom op on torch's current stream, a JAX FFI handler on XLA's stream; and for a stream
   * being captured into a CUDA graph (where, since 1.2.0, a launch without a completion is a graph node either way:
   * see stream_create). Without admission it can block the calling thread, like any driver
   * launch, while the stream's hardware queue is full (1,021 launches or copies per connection). */
  CUASYNC_LAUNCH_UNTRACKED = 1,
  /* ABI 1.2: programmatic dependent launch. The kernel may start while the previous kernel on the stream still runs
   * (compute capability 9.0+), hiding the gap between short kernels. Set for the driver only when the kernel's image
   * waits for its predecessor before reading its results (griddepcontrol.wait / cudaGridDependencySynchronize());
   * any other kernel is launched in plain stream order, as without the flag. A 1.1 library refuses the bit
   * (CUASYNC_ERROR_UNSUPPORTED). */
  CUASYNC_LAUNCH_DEPENDENT = 2
} cuasync_launch_flags;

typedef struct cuasync_launch_args {
  size_t struct_size;
  cuasync_stream stream;          /* in */
  cuasync_kernel kernel;          /* in */
  uint32_t grid[3];               /* in: 0 is taken as 1 */
  uint32_t block[3];              /* in: 0 is taken as 1 */
  uint32_t shared_memory_bytes;   /* in */
  const cuasync_kernel_arg* args; /* in: borrowed, num_args of them, one per kernel parameter */
  size_t num_args;
  cuasync_completion completion;  /* in: empty with CUASYNC_LAUNCH_UNTRACKED (else CUASYNC_ERROR_INVALID_ARGUMENT) */
  uint32_t flags;                 /* in (ABI 1.1): cuasync_launch_flags; 0 tracks the launch as 1.0 does; a bit this
                                     library does not know is refused with CUASYNC_ERROR_UNSUPPORTED (before the
                                     handles are looked at) */
  const cuasync_arg_type* arg_types; /* in (ABI 1.4): optional, borrowed: num_args cuasync_arg_type codes, one per
                                     argument (CUASYNC_ARG_TYPE_NONE for one whose type is not given); NULL: sizes
                                     only, as 1.3. For a kernel whose types are known (kernel_get's `typed`), an
                                     argument whose type does not fit its parameter is refused with
                                     CUASYNC_ERROR_INVALID_ARGUMENT naming the parameter's index, its type and the
                                     type given; an extern "C" kernel's launch ignores them and checks sizes. A 1.3
                                     library refuses a non-NULL array (CUASYNC_ERROR_UNSUPPORTED) */
} cuasync_launch_args;
#define CUASYNC_LAUNCH_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_launch_args, arg_types)

/* ---- ABI 1.2: the library's version, admission bounds, compiling without a GPU, the log ---------------------- */

/** Arguments of library_version (ABI 1.2): the version of the library (as cuasync/version.hpp numbers it), which
 * moves with every release; the ABI's version is the table's abi_major and abi_minor. Cannot fail but for NULL or a
 * bad struct_size. Needs no driver. */
typedef struct cuasync_library_version_args {
  size_t struct_size;  /**< in: CUASYNC_LIBRARY_VERSION_ARGS_SIZE */
  uint32_t major;      /**< out: the library's major version */
  uint32_t minor;      /**< out: the library's minor version */
  uint32_t patch;      /**< out: the library's patch version */
  const char* version; /**< out: "MAJOR.MINOR.PATCH", static storage (never freed) */
} cuasync_library_version_args;
#define CUASYNC_LIBRARY_VERSION_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_library_version_args, version)

/** Arguments of runtime_admission_get and runtime_admission_set (ABI 1.2): the admission bounds of the runtime's
 * context (see the top of this header): how many copies, memsets and tracked launches may be in flight at once on one
 * stream and on the whole context before a call fails with CUASYNC_ERROR_BUSY. The bounds belong to the context: every
 * runtime on it (and cuasync's C++ users of it in the process) shares them. A change applies to operations admitted
 * from then on; work already in flight keeps its places. The defaults (64 and 500) keep the driver's hardware queues
 * (1,021 launches or copies per connection) from filling whatever the streams' mapping to connections; above them, or
 * with 0 (no bound), a call can block the calling thread while a queue is full. */
typedef struct cuasync_admission_limits_args {
  size_t struct_size;      /**< in: CUASYNC_ADMISSION_LIMITS_ARGS_SIZE */
  cuasync_runtime runtime; /**< in */
  uint32_t per_stream;     /**< get: out; set: in. Operations in flight on one stream; 0: no bound */
  uint32_t per_context;    /**< get: out; set: in. Operations in flight on the context; 0: no bound. Set: a non-zero
                                per_stream above a non-zero per_context is refused (CUASYNC_ERROR_INVALID_ARGUMENT) */
} cuasync_admission_limits_args;
#define CUASYNC_ADMISSION_LIMITS_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_admission_limits_args, per_context)

/** What a compiled image is (cuasync_compile_image_args.kind). */
typedef enum cuasync_image_kind {
  CUASYNC_IMAGE_CUBIN = 0, /**< machine code (an ELF file) for one sm_XY: cuModuleLoadData loads it on such a GPU */
  CUASYNC_IMAGE_PTX = 1    /**< PTX text for compute_XY (no trailing NUL in `size`; one follows in memory): the
                                driver compiles it at load, on XY and newer GPUs */
} cuasync_image_kind;

typedef struct cuasync_image_t* cuasync_image; /**< a compiled image and what came with it (ABI 1.2) */

/** Arguments of compile_image (ABI 1.2): compiles CUDA C++ with NVRTC for a named architecture, with no driver, GPU
 * or runtime (a build step, a cache warmed ahead of time, a program that loads the image itself). It goes through
 * cuasync's memory and disk caches, as compile does (CUASYNC_CACHE_DIR, CUASYNC_CACHE=off). Blocks the calling thread
 * for the compile (10 ms to seconds; a cache hit is fast). Every out pointer is owned by `image`, valid until
 * image_destroy. Errors: an architecture NVRTC does not support is refused with CUASYNC_ERROR_UNSUPPORTED naming those
 * it does; NVRTC missing or a compile error is CUASYNC_ERROR_COMPILE (the message quotes the first error and its source
 * line; nvrtc_result is set). */
typedef struct cuasync_compile_image_args {
  size_t struct_size;                  /**< in: CUASYNC_COMPILE_IMAGE_ARGS_SIZE */
  const char* arch;                    /**< in: borrowed: "sm_90" (a CUBIN), "compute_90" (PTX) or "90" (as sm_90) */
  const char* name;                    /**< in: borrowed, the program's name in messages ("saxpy.cu"), or NULL */
  const char* source;                  /**< in: borrowed CUDA C++ source */
  const char* const* options;          /**< in: borrowed NVRTC options ("-DN=4"); not one that sets the target */
  size_t num_options;                  /**< in: entries in options */
  const cuasync_header* headers;       /**< in: borrowed in-memory headers */
  size_t num_headers;                  /**< in: entries in headers */
  const char* const* name_expressions; /**< in: borrowed ("saxpy<float>"): their lowered names are returned */
  size_t num_name_expressions;         /**< in: entries in name_expressions */
  cuasync_image image;                 /**< out: destroy with image_destroy */
  const void* data;                    /**< out: the image's bytes (owned by image) */
  size_t size;                         /**< out: bytes at data */
  uint32_t kind;                       /**< out: a cuasync_image_kind */
  const char* architecture;            /**< out: "sm_90" or "compute_90" (owned by image) */
  const char* log;                     /**< out: NVRTC's log (warnings), "" when empty (owned by image) */
  size_t log_size;                     /**< out: strlen(log) */
  /** out: num_name_expressions entries, the lowered (mangled) name of name_expressions[i] for cuModuleGetFunction
   * (owned by image); NULL when none were given */
  const char* const* lowered_names;
} cuasync_compile_image_args;
#define CUASYNC_COMPILE_IMAGE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_compile_image_args, lowered_names)

/** Arguments of image_destroy (ABI 1.2). */
typedef struct cuasync_image_destroy_args {
  size_t struct_size;  /**< in: CUASYNC_IMAGE_DESTROY_ARGS_SIZE */
  cuasync_image image; /**< in: its bytes, names and log are freed; the handle goes */
} cuasync_image_destroy_args;
#define CUASYNC_IMAGE_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_image_destroy_args, image)

/** Log levels (log_sink_set). */
typedef enum cuasync_log_level {
  CUASYNC_LOG_FROM_ENVIRONMENT = -1, /**< as a threshold: what CUASYNC_LOG says (off when unset) */
  CUASYNC_LOG_OFF = 0,               /**< as a threshold: nothing */
  CUASYNC_LOG_INFO = 1,              /**< libraries loaded (paths, versions), compiles and disk cache hits, fallbacks */
  CUASYNC_LOG_DEBUG = 2              /**< also per-operation detail: memory cache hits, each pageable copy's path */
} cuasync_log_level;

/** A log sink: called with one message (no trailing newline, borrowed for the call) on the thread that logs, which
 * may be any thread, the caller's or cuasync's; with no lock of cuasync's held, so it may call cuasync (log_sink_set
 * included). Keep it short: a cuasync thread that logs waits for it. */
typedef void (*cuasync_log_sink)(void* user, int level, const char* message);

/** Arguments of log_sink_set (ABI 1.2): where the process's cuasync log goes and how much of it. Without a sink the
 * log goes to stderr ("cuasync: info: ..."), at the threshold CUASYNC_LOG names (off when unset). Blocks until calls
 * to the previous sink running on other threads have returned: once it returns, the previous sink is never called
 * again and its `user` may be freed (a call running on this thread, a sink setting another, is not waited for). */
typedef struct cuasync_log_sink_set_args {
  size_t struct_size;    /**< in: CUASYNC_LOG_SINK_SET_ARGS_SIZE */
  cuasync_log_sink sink; /**< in: NULL: back to stderr */
  void* user;            /**< in: passed to sink untouched */
  int level;             /**< in: a cuasync_log_level, the most detailed delivered (CUASYNC_LOG_OFF: nothing); others
                              are refused with CUASYNC_ERROR_INVALID_ARGUMENT */
} cuasync_log_sink_set_args;
#define CUASYNC_LOG_SINK_SET_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_log_sink_set_args, level)

/* ---- ABI 1.3: the flight recorder -------------------------------------------------------------------------------- */

/** Arguments of flight_recorder_set (ABI 1.3): turns the flight recorder on or off. While on, every operation on a
 * stream (launches, copies, memsets, the events cuasync records for completions) is kept in a ring per stream of the
 * last `per_stream` operations: the driver call, the kernel or copy, the launch's grid, block, shared memory and
 * parameter sizes, a copy's bytes and addresses, the C ABI completion (queue and token) awaiting it, when it was issued
 * and when it was seen done. A dump (flight_recorder_dump) names the calls in flight. The recorder dumps by itself
 * (text to stderr, text and Chrome trace JSON files in `directory`) when an operation has been in flight `stall_ms`
 * and its stream is still busy (a kernel that never ends), when a completion fails with a device fault, and on
 * `signal`. CUASYNC_FLIGHT=1 (or =N, the ring's length) turns it on when the driver loads, with CUASYNC_FLIGHT_STALL_MS,
 * CUASYNC_FLIGHT_DIR and CUASYNC_FLIGHT_SIGNAL. Off, it costs nothing; on, ~20-30 ns of host time per operation.
 * Needs no driver. Errors: per_stream outside 8 .. 65536 (but 0), a signal that is not one:
 * CUASYNC_ERROR_INVALID_ARGUMENT. */
typedef struct cuasync_flight_recorder_set_args {
  size_t struct_size;    /**< in: CUASYNC_FLIGHT_RECORDER_SET_ARGS_SIZE */
  uint32_t per_stream;   /**< in: operations kept per stream (rounded up to a power of two); 0: off (what was recorded
                              stays readable) */
  uint32_t stall_ms;     /**< in: an operation in flight this long on a busy stream is a stall, dumped once; 0: no
                              stall check */
  const char* directory; /**< in: borrowed: where dump files go (cuasync-flight-PID-N.txt and .json); NULL or "":
                              the current directory */
  int signal;            /**< in: the signal that asks for a dump (SIGUSR1 is 10 on Linux); 0: none. Installed only when
                              the signal has its default disposition (an application's handler is left alone) */
} cuasync_flight_recorder_set_args;
#define CUASYNC_FLIGHT_RECORDER_SET_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_flight_recorder_set_args, signal)

/** What flight_recorder_dump returns (cuasync_flight_recorder_dump_args.format). */
typedef enum cuasync_flight_format {
  CUASYNC_FLIGHT_TEXT = 0,       /**< the text a person reads: what is in flight on which stream and device, from where */
  CUASYNC_FLIGHT_CHROME_JSON = 1 /**< Chrome trace event JSON: a lane per stream, a span per operation (Perfetto) */
} cuasync_flight_format;

/** Arguments of flight_recorder_dump (ABI 1.3): what the flight recorder holds now, into the caller's buffer. Never
 * blocks on the GPU or on a thread that records. Needs no driver (without one, or with the recorder never on, the
 * dump says that no stream was recorded). Errors: an unknown format: CUASYNC_ERROR_INVALID_ARGUMENT. */
typedef struct cuasync_flight_recorder_dump_args {
  size_t struct_size;   /**< in: CUASYNC_FLIGHT_RECORDER_DUMP_ARGS_SIZE */
  const char* reason;   /**< in: borrowed: the dump's headline; NULL: "asked for by the caller" */
  uint32_t format;      /**< in: a cuasync_flight_format */
  uint32_t write_files; /**< in: non-zero: also write the dump as the recorder's own dumps are (stderr, both files) */
  char* buffer;         /**< in: the caller's, `capacity` bytes; NULL with capacity 0 asks for the size only */
  size_t capacity;      /**< in */
  size_t size;          /**< out: the dump's length in bytes, without the NUL; when capacity <= size the buffer holds
                             its first capacity - 1 bytes and a NUL (call again with size + 1) */
} cuasync_flight_recorder_dump_args;
#define CUASYNC_FLIGHT_RECORDER_DUMP_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_flight_recorder_dump_args, size)

/* ---- the table ---------------------------------------------------------------------------------------------------- */

/* ---- ABI 1.5: compiles that complete like GPU work ---------------------------------------------------------------- */

typedef struct cuasync_compile_job_t* cuasync_compile_job; /**< a compile under way (ABI 1.5) */

/** Arguments of compile_image_start (ABI 1.5): compile_image without blocking the caller. The compile's arguments are
 * read and checked in the call (an unknown architecture or a malformed argument is this call's error, and no job is
 * made) and copied, so they may be freed when it returns. The compile runs on cuasync's compile threads, or in the
 * compile farm's worker processes when CUASYNC_JIT_FARM is set (where compiles of one process scale past NVRTC's
 * in-process limit), through the memory and disk caches; then its completion goes where `completion` says, with
 * CUASYNC_OK or the compile's error code (CUASYNC_ERROR_COMPILE, ...). Call compile_image_finish once for every job,
 * after its completion or before it (it then waits). */
typedef struct cuasync_compile_image_start_args {
  size_t struct_size;                        /**< in: CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE */
  const cuasync_compile_image_args* compile; /**< in: borrowed for the call: its in fields, as compile_image reads them
                                                  (its out fields are not written: compile_image_finish does) */
  cuasync_completion completion;             /**< in: where the compile's completion goes */
  cuasync_compile_job job;                   /**< out: finish it once with compile_image_finish */
} cuasync_compile_image_start_args;
#define CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_compile_image_start_args, job)

/** Arguments of compile_image_finish (ABI 1.5): the job's outcome, waiting for it when its completion has not come
 * yet. Returns the compile's error (as compile_image would have), or NULL and sets the out fields of `result` (image,
 * data, size, kind, architecture, log, log_size, lowered_names) as compile_image does. The job handle goes either way. */
typedef struct cuasync_compile_image_finish_args {
  size_t struct_size;                 /**< in: CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE */
  cuasync_compile_job job;            /**< in: invalid after the call */
  cuasync_compile_image_args* result; /**< in: the caller's struct (struct_size set), its out fields written */
} cuasync_compile_image_finish_args;
#define CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_compile_image_finish_args, result)

/** Arguments of graph_launch (ABI 1.5): one replay of a CUDA graph the caller instantiated (a `CUgraphExec`, from
 * its own capture or graph API, in the stream's context), tracked like a launch: it takes an admission place (none:
 * CUASYNC_ERROR_BUSY, nothing enqueued) and its completion comes when this replay has completed, with the device's
 * error of a replay that faulted. Replays of one graph are predicted as one kind of work (their waits wake on time).
 * On a stream that is being captured the replay becomes a child-graph node, and a completion asked is reported at once
 * (CUASYNC_OK: "captured"), as for launches. */
typedef struct cuasync_graph_launch_args {
  size_t struct_size;            /**< in: CUASYNC_GRAPH_LAUNCH_ARGS_SIZE */
  cuasync_stream stream;         /**< in */
  void* graph_exec;              /**< in: borrowed `CUgraphExec`; it must outlive the replay */
  cuasync_completion completion; /**< in: when the replay has completed (no queue: none; its place comes back later) */
} cuasync_graph_launch_args;
#define CUASYNC_GRAPH_LAUNCH_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_graph_launch_args, completion)

/* ---- ABI 1.6: replays of someone else's graph, awaited ----------------------------------------------------------- */

typedef struct cuasync_replay_anchor_t* cuasync_replay_anchor; /**< a point of a captured graph (ABI 1.6) */

/** Arguments of replay_anchor_mark (ABI 1.6): called while `stream` is being captured (torch.cuda.graph, the caller's
 * cuStreamBeginCapture), adds to the capture, after the work captured on it so far, a one-thread kernel that counts the
 * replays that get past this point (a generation counter in pinned host memory) and an event record node that reports
 * a replay's device error. The graph's launches are the caller's; replay_anchor_wait completes once per replay. The
 * anchor must outlive every launch of the graphs it was captured into (a later replay writes freed memory). Errors: a
 * stream not being captured: CUASYNC_ERROR_CUDA with CUDA_ERROR_ILLEGAL_STATE (the capture is left as it was). */
typedef struct cuasync_replay_anchor_mark_args {
  size_t struct_size;           /**< in: CUASYNC_REPLAY_ANCHOR_MARK_ARGS_SIZE */
  cuasync_stream stream;        /**< in: being captured */
  uint64_t fault_check_ns;      /**< in: how often a pending wait asks for a device error; 0: 200 µs */
  cuasync_replay_anchor anchor; /**< out: destroy with replay_anchor_destroy */
} cuasync_replay_anchor_mark_args;
#define CUASYNC_REPLAY_ANCHOR_MARK_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_replay_anchor_mark_args, anchor)

/** Arguments of replay_anchor_wait (ABI 1.6): a completion when the anchor has reached `generation` (that many
 * replays got past it since it was marked): CUASYNC_OK once the replay's work before the mark has completed (never
 * earlier), or the device's error of a replay that faulted (for every generation it did not reach; those it reached
 * complete with CUASYNC_OK). A generation already reached completes at once (through the queue, never inside the
 * call). Without a queue nothing is awaited: the call only reports `reached`. */
typedef struct cuasync_replay_anchor_wait_args {
  size_t struct_size;            /**< in: CUASYNC_REPLAY_ANCHOR_WAIT_ARGS_SIZE */
  cuasync_replay_anchor anchor;  /**< in */
  uint64_t generation;           /**< in: the generation to wait for; 0: the next (reached + 1). out: the one awaited */
  cuasync_completion completion; /**< in */
  uint64_t reached;              /**< out: the generations reached at the call */
} cuasync_replay_anchor_wait_args;
#define CUASYNC_REPLAY_ANCHOR_WAIT_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_replay_anchor_wait_args, reached)

/** Arguments of replay_anchor_destroy (ABI 1.6). Waits still pending keep what they need until they complete. */
typedef struct cuasync_replay_anchor_destroy_args {
  size_t struct_size;           /**< in: CUASYNC_REPLAY_ANCHOR_DESTROY_ARGS_SIZE */
  cuasync_replay_anchor anchor; /**< in: invalid after the call */
} cuasync_replay_anchor_destroy_args;
#define CUASYNC_REPLAY_ANCHOR_DESTROY_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_replay_anchor_destroy_args, anchor)

typedef struct cuasync_api {
  size_t struct_size; /* the table's size in this library: a field is usable when it fits */
  uint32_t abi_major;
  uint32_t abi_minor;
  /* errors (cannot fail) */
  void (*error_destroy)(cuasync_error* error); /* NULL is accepted */
  void (*error_info)(cuasync_error_info_args* args);
  /* completions */
  cuasync_error* (*queue_create)(cuasync_queue_create_args* args);
  cuasync_error* (*queue_destroy)(cuasync_queue_destroy_args* args);
  cuasync_error* (*queue_fd)(cuasync_queue_fd_args* args);
  cuasync_error* (*queue_drain)(cuasync_queue_drain_args* args);
  cuasync_error* (*host_token_create)(cuasync_host_token_create_args* args);
  cuasync_error* (*host_token_complete)(cuasync_host_token_complete_args* args);
  /* devices, runtimes, streams, events */
  cuasync_error* (*device_count)(cuasync_device_count_args* args);
  cuasync_error* (*runtime_create)(cuasync_runtime_create_args* args);
  cuasync_error* (*runtime_destroy)(cuasync_runtime_destroy_args* args);
  cuasync_error* (*stream_create)(cuasync_stream_create_args* args);
  cuasync_error* (*stream_destroy)(cuasync_stream_destroy_args* args);
  cuasync_error* (*stream_native)(cuasync_stream_native_args* args);
  cuasync_error* (*stream_wait)(cuasync_stream_wait_args* args);
  cuasync_error* (*event_record)(cuasync_event_record_args* args);
  cuasync_error* (*event_query)(cuasync_event_query_args* args);
  cuasync_error* (*event_wait)(cuasync_event_wait_args* args);
  cuasync_error* (*event_destroy)(cuasync_event_destroy_args* args);
  /* memory and copies */
  cuasync_error* (*buffer_allocate)(cuasync_buffer_allocate_args* args);
  cuasync_error* (*buffer_free)(cuasync_buffer_free_args* args);
  cuasync_error* (*copy)(cuasync_copy_args* args);
  cuasync_error* (*memset)(cuasync_memset_args* args);
  /* JIT and launches */
  cuasync_error* (*compile)(cuasync_compile_args* args);
  cuasync_error* (*module_destroy)(cuasync_module_destroy_args* args);
  cuasync_error* (*kernel_get)(cuasync_kernel_get_args* args);
  cuasync_error* (*launch)(cuasync_launch_args* args);
  cuasync_error* (*package_load)(cuasync_package_load_args* args);
  cuasync_error* (*buffer_import_dlpack)(cuasync_buffer_import_dlpack_args* args);
  cuasync_error* (*buffer_export_dlpack)(cuasync_buffer_export_dlpack_args* args);
  /* ABI 1.2 */
  cuasync_error* (*library_version)(cuasync_library_version_args* args);
  cuasync_error* (*runtime_admission_get)(cuasync_admission_limits_args* args);
  cuasync_error* (*runtime_admission_set)(cuasync_admission_limits_args* args);
  cuasync_error* (*compile_image)(cuasync_compile_image_args* args);
  cuasync_error* (*image_destroy)(cuasync_image_destroy_args* args);
  cuasync_error* (*log_sink_set)(cuasync_log_sink_set_args* args);
  /* ABI 1.3 */
  cuasync_error* (*flight_recorder_set)(cuasync_flight_recorder_set_args* args);
  cuasync_error* (*flight_recorder_dump)(cuasync_flight_recorder_dump_args* args);
  /* ABI 1.5 */
  cuasync_error* (*compile_image_start)(cuasync_compile_image_start_args* args);
  cuasync_error* (*compile_image_finish)(cuasync_compile_image_finish_args* args);
  cuasync_error* (*graph_launch)(cuasync_graph_launch_args* args);
  /* ABI 1.6 */
  cuasync_error* (*replay_anchor_mark)(cuasync_replay_anchor_mark_args* args);
  cuasync_error* (*replay_anchor_wait)(cuasync_replay_anchor_wait_args* args);
  cuasync_error* (*replay_anchor_destroy)(cuasync_replay_anchor_destroy_args* args);
  /* ABI 1.7 */
  /* queue_drain, after one look for finished GPU work on the caller's thread: the pass cuasync's poller thread makes
   * (host words read, events queried now and then, in relaxed capture mode), made here only when no other pass is
   * running (it never waits for one), whose completions go to their queues (this one's among them) before the drain.
   * For a consumer that spins on its queue while it expects a completion within microseconds: the record then comes
   * without the poller thread's hand-over (~1.5 us on the H200). Never waits for the GPU; the same arguments, errors
   * and fd protocol as queue_drain. */
  cuasync_error* (*queue_poll)(cuasync_queue_drain_args* args);
} cuasync_api;
/* The table's size in each version that shipped: a function is usable when api->struct_size reaches its version's. */
#define CUASYNC_API_SIZE_1_0 CUASYNC_STRUCT_SIZE(cuasync_api, buffer_export_dlpack)
#define CUASYNC_API_SIZE_1_1 CUASYNC_API_SIZE_1_0 /* 1.1 added struct fields, no function */
#define CUASYNC_API_SIZE_1_2 CUASYNC_STRUCT_SIZE(cuasync_api, log_sink_set)
#define CUASYNC_API_SIZE_1_3 CUASYNC_STRUCT_SIZE(cuasync_api, flight_recorder_dump)
#define CUASYNC_API_SIZE_1_4 CUASYNC_API_SIZE_1_3 /* 1.4 added struct fields (typed arguments), no function */
#define CUASYNC_API_SIZE_1_5 CUASYNC_STRUCT_SIZE(cuasync_api, graph_launch)
#define CUASYNC_API_SIZE_1_6 CUASYNC_STRUCT_SIZE(cuasync_api, replay_anchor_destroy)
#define CUASYNC_API_SIZE_1_7 CUASYNC_STRUCT_SIZE(cuasync_api, queue_poll)

/* The one exported symbol (dlsym(handle, "cuasync_get_api")). `major`: the major version the caller was built for
 * (CUASYNC_ABI_MAJOR). `*api` (out): the static table, never freed; check api->struct_size before using a field added
 * after 1.0. Never needs a GPU. An unknown major is refused with an error, and `*api` is still set to the library's own
 * table (its abi_major says which it has), so that the caller can read the error with its error_info and free it with
 * its error_destroy; call nothing else of it. `api` NULL: a static error, which needs (and has) no error_destroy. */
cuasync_error* cuasync_get_api(uint32_t major, const cuasync_api** api);
typedef cuasync_error* (*cuasync_get_api_fn)(uint32_t major, const cuasync_api** api);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CUASYNC_H */
