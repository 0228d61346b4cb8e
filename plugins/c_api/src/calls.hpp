// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the C ABI's calls, one function per table entry (defined in calls_*.cpp).
#include "abi.hpp"
#include "completion_queue.hpp"

#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/admission.hpp>
#include <cuasync/jit/program.hpp>

namespace cuasync::c_api {

void destroy_error(cuasync_error* e) noexcept;
void error_info(cuasync_error_info_args* a) noexcept;

cuasync_error* queue_create(cuasync_queue_create_args* a) noexcept;
cuasync_error* queue_destroy(cuasync_queue_destroy_args* a) noexcept;
cuasync_error* queue_fd(cuasync_queue_fd_args* a) noexcept;
cuasync_error* queue_drain(cuasync_queue_drain_args* a) noexcept;
cuasync_error* queue_poll(cuasync_queue_drain_args* a) noexcept;
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

// ABI 1.2
cuasync_error* library_version(cuasync_library_version_args* a) noexcept;
cuasync_error* runtime_admission_get(cuasync_admission_limits_args* a) noexcept;
cuasync_error* runtime_admission_set(cuasync_admission_limits_args* a) noexcept;
cuasync_error* compile_image(cuasync_compile_image_args* a) noexcept;
cuasync_error* image_destroy(cuasync_image_destroy_args* a) noexcept;
cuasync_error* compile_image_start(cuasync_compile_image_start_args* a) noexcept;
cuasync_error* compile_image_finish(cuasync_compile_image_finish_args* a) noexcept;
cuasync_error* graph_launch(cuasync_graph_launch_args* a) noexcept;
cuasync_error* replay_anchor_mark(cuasync_replay_anchor_mark_args* a) noexcept;
cuasync_error* replay_anchor_wait(cuasync_replay_anchor_wait_args* a) noexcept;
cuasync_error* replay_anchor_destroy(cuasync_replay_anchor_destroy_args* a) noexcept;
cuasync_error* log_sink_set(cuasync_log_sink_set_args* a) noexcept;
cuasync_error* flight_recorder_set(cuasync_flight_recorder_set_args* a) noexcept;
cuasync_error* flight_recorder_dump(cuasync_flight_recorder_dump_args* a) noexcept;

//! A program and its options as a compile call's arguments give them (compile, compile_image).
struct program_request {
  jit::program program;
  jit::compile_options options;
};
//! Reads them, refusing NULL sources, counts without arrays and NULL entries with messages naming `call`.
//! @throws abi_error CUASYNC_ERROR_INVALID_ARGUMENT
program_request read_program(const char* call, const char* name, const char* source, const char* const* options,
                             std::size_t num_options, const cuasync_header* headers, std::size_t num_headers,
                             const char* const* name_expressions, std::size_t num_name_expressions);

struct stream_object;
//! A place for one operation on `s` (engine/admission.hpp), after the stream's spare credit is given back; or, with
//! `places` > 1, a credit of up to that many (try_admit_n). @throws abi_error CUASYNC_ERROR_BUSY when there is none
admission_ticket admit(const stream_object& s, const char* call, bool hold = false, std::uint32_t places = 1);
//! True when `s` is being captured into a CUDA graph (a framework's torch.cuda.graph, the caller's own
//! cuStreamBeginCapture): its operations then become graph nodes, with no place taken and no event recorded (the
//! event would be a node, never seen done). Only a stream someone else can capture is asked (adopted, or created and
//! its handle given out by stream_native): a created stream's path makes no driver call. @throws cuda_error
bool is_captured(const stream_object& s);
//! For an operation enqueued on a captured stream (a graph node): reports its completion, if one was asked, at once
//! with CUASYNC_OK. It says "captured": the operation is in the graph, and runs at each launch of it (what a framework's
//! code written for eager streams awaits, e.g. Python's keep-alive of a copy's memory). Never throws.
void complete_captured(delivery& to) noexcept;
//! Refuses `call` on a captured stream (what needs to see the stream's work done). @throws abi_error, cuda_error
void refuse_if_captured(const stream_object& s, const char* call);
//! Refuses an event record on a stream a staged copy holds (the event would come before the chunks still to be
//! enqueued). @throws abi_error CUASYNC_ERROR_BUSY
void refuse_if_held(const stream_object& s, const char* call);
//! Reports `to` (if any) when the work enqueued on `s` so far completes, and gives `ticket`'s place back then (a
//! pooled event and the engine's callbacks). `work_key` and `issue_ns`: what the work is and when it was enqueued
//! (wait_target), so that the engine predicts repeating work's end. Never throws once the event is recorded.
//! @throws cuda_error
void complete_after(stream_ref s, admission_ticket ticket, delivery to, std::uint64_t work_key = 0,
                    long long issue_ns = 0);

}  // namespace cuasync::c_api
