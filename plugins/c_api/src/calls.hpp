#pragma once
// Internal: the C ABI's calls, one function per table entry (defined in calls_*.cpp).
#include "abi.hpp"
#include "completion_queue.hpp"

#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/admission.hpp>

namespace cuasync::c_api {

void destroy_error(cuasync_error* e) noexcept;
void error_info(cuasync_error_info_args* a) noexcept;

cuasync_error* queue_create(cuasync_queue_create_args* a) noexcept;
cuasync_error* queue_destroy(cuasync_queue_destroy_args* a) noexcept;
cuasync_error* queue_fd(cuasync_queue_fd_args* a) noexcept;
cuasync_error* queue_drain(cuasync_queue_drain_args* a) noexcept;
cuasync_error* host_token_create(cuasync_host_token_create_args* a) noexcept;
cuasync_error* host_token_complete(cuasync_host_token_complete_args* a) noexcept;

cuasync_error* device_count(cuasync_device_count_args* a) noexcept;
cuasync_error* runtime_create(cuasync_runtime_create_args* a) noexcept;
cuasync_error* runtime_destroy(cuasync_runtime_destroy_args* a) noexcept;
cuasync_error* stream_create(cuasync_stream_create_args* a) noexcept;
cuasync_error* stream_destroy(cuasync_stream_destroy_args* a) noexcept;
cuasync_error* stream_native(cuasync_stream_native_args* a) noexcept;
cuasync_error* stream_wait(cuasync_stream_wait_args* a) noexcept;
cuasync_error* event_record(cuasync_event_record_args* a) noexcept;
cuasync_error* event_query(cuasync_event_query_args* a) noexcept;
cuasync_error* event_wait(cuasync_event_wait_args* a) noexcept;
cuasync_error* event_destroy(cuasync_event_destroy_args* a) noexcept;

cuasync_error* buffer_allocate(cuasync_buffer_allocate_args* a) noexcept;
cuasync_error* buffer_free(cuasync_buffer_free_args* a) noexcept;
cuasync_error* copy(cuasync_copy_args* a) noexcept;
cuasync_error* memset(cuasync_memset_args* a) noexcept;

cuasync_error* compile(cuasync_compile_args* a) noexcept;
cuasync_error* module_destroy(cuasync_module_destroy_args* a) noexcept;
cuasync_error* kernel_get(cuasync_kernel_get_args* a) noexcept;
cuasync_error* launch(cuasync_launch_args* a) noexcept;
cuasync_error* package_load(cuasync_package_load_args* a) noexcept;
cuasync_error* buffer_import_dlpack(cuasync_buffer_import_dlpack_args* a) noexcept;
cuasync_error* buffer_export_dlpack(cuasync_buffer_export_dlpack_args* a) noexcept;

struct stream_object;
//! A place for one operation on `s` (engine/admission.hpp). @throws abi_error CUASYNC_ERROR_BUSY when there is none
admission_ticket admit(const stream_object& s, const char* call, bool hold = false);
//! Refuses an operation that cuasync tracks (one that records an event) on an adopted stream that is being captured
//! into a CUDA graph: the event would be a graph node, never recorded, never seen done. Created streams are not asked
//! (no driver call on their path). @throws abi_error CUASYNC_ERROR_INVALID_ARGUMENT, cuda_error
void refuse_if_captured(const stream_object& s, const char* call);
//! Refuses an event record on a stream a staged copy holds (the event would come before the chunks still to be
//! enqueued). @throws abi_error CUASYNC_ERROR_BUSY
void refuse_if_held(const stream_object& s, const char* call);
//! Reports `to` (if any) when the work enqueued on `s` so far completes, and gives `ticket`'s place back then (a
//! pooled event and the engine's callbacks). Never throws once the event is recorded. @throws cuda_error
void complete_after(stream_ref s, admission_ticket ticket, delivery to);

}  // namespace cuasync::c_api
