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
 *   readable, call completion_queue_drain until it returns fewer records than asked for; the fd stays readable while
 *   records remain and becomes unreadable only inside the drain that returns fewer than asked for (one that found the
 *   queue empty), so a record queued after that makes it readable again. A queue whose fd is never asked for
 *   (a consumer that drains by polling, once a frame or in a loop) makes no eventfd syscalls.
 *
 * No call waits for the GPU on the caller's thread. Copies, memsets and launches take a place among the work in flight
 * first (at most 64 per stream and 500 per context by default, below what the driver's hardware queues hold): with no
 * place they fail with CUASYNC_ERROR_BUSY and enqueue nothing, where the driver would have blocked the caller. (An
 * untracked launch, CUASYNC_LAUNCH_UNTRACKED, takes no place: it is the caller's to keep the queue from filling.)
 *
 * Ownership and lifetime of every pointer are stated next to it. "Borrowed" pointers are read during the call only.
 */
#ifndef CUASYNC_H
#define CUASYNC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUASYNC_ABI_MAJOR 1
#define CUASYNC_ABI_MINOR 1

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

typedef struct cuasync_runtime_t* cuasync_runtime;    /* one per device (or adopted context) */
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

typedef struct cuasync_runtime_create_args {
  size_t struct_size;
  int device;              /* in: the device ordinal (its primary context, the one PyTorch, JAX and CuPy use) */
  void* context;           /* in: optional CUcontext to adopt instead (borrowed; must outlive the runtime) */
  cuasync_runtime runtime; /* out: destroy with runtime_destroy */
} cuasync_runtime_create_args;
#define CUASYNC_RUNTIME_CREATE_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_runtime_create_args, runtime)

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
                              an adopted stream is being captured into a CUDA graph, the operations that cuasync
                              tracks on it (copy, memset, stream_wait, event_record and launches without
                              CUASYNC_LAUNCH_UNTRACKED) are refused with CUASYNC_ERROR_INVALID_ARGUMENT: the event
                              cuasync would record could never be queried (launch untracked there instead) */
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
 * waits for the GPU; enqueued in stream order in the call. Pageable host memory never takes the driver's slow,
 * host-waiting path: up to 256 MiB it goes through a pooled pinned block of its size (H2D: copied into it in the call,
 * by cuasync's copy threads; D2H: copied out of it after the DMA, before the completion); larger copies go through the
 * staged copier's ring, and hold the stream until their last chunk is enqueued (other copies, memsets, launches, event
 * records and DLPack exports' handshakes on it meanwhile fail with CUASYNC_ERROR_BUSY; the stream and buffers freed
 * on it meanwhile stay until the copy is done with them). Host memory must stay valid until the completion. */
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
/* Tensors cross frameworks as DLPack 1.x `DLManagedTensorVersioned` (from the caller's own dlpack.h: cuasync declares
 * the layout itself and takes it as `void*`). */

/* Imports a tensor (CUDA device, pinned host or managed memory, contiguous) as a buffer. Its deleter is called exactly
 * once: when the buffer is freed (and every tensor exported from it deleted) and the work enqueued on `stream` up to
 * then has completed (cuasync's uses of the tensor belong on `stream`), on a cuasync thread; or, with `released` set
 * (ABI 1.1), by the caller once that completion says so. */
typedef struct cuasync_buffer_import_dlpack_args {
  size_t struct_size;
  cuasync_runtime runtime; /* in: the tensor's device must be the runtime's */
  cuasync_stream stream;   /* in: where cuasync uses the tensor (the consumer's stream of the exchange) */
  void* managed;           /* in: a DLManagedTensorVersioned*; owned by cuasync from a successful call on */
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
  void* managed;             /* out: a DLManagedTensorVersioned* the consumer owns (call its deleter once) */
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
 * entry points (its format: jit/include/cuasync/jit/kernel_package.hpp), compiled for the runtime's device through
 * the caches. A malformed manifest is an error naming the file, the line and the problem. */
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
} cuasync_kernel_get_args;
#define CUASYNC_KERNEL_GET_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_kernel_get_args, param_sizes_capacity)

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
   * being captured into a CUDA graph, where an event recorded by cuasync could never be queried (tracked operations
   * on a captured adopted stream are refused). Without admission it can block the calling thread, like any driver
   * launch, while the stream's hardware queue is full (1,021 launches or copies per connection). */
  CUASYNC_LAUNCH_UNTRACKED = 1
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
} cuasync_launch_args;
#define CUASYNC_LAUNCH_ARGS_SIZE CUASYNC_STRUCT_SIZE(cuasync_launch_args, flags)

/* ---- the table ---------------------------------------------------------------------------------------------------- */

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
} cuasync_api;
#define CUASYNC_API_SIZE_1_0 CUASYNC_STRUCT_SIZE(cuasync_api, buffer_export_dlpack)

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
