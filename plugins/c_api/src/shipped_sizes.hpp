// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal: the size of each arguments struct as ABI 1.0 shipped it (or the version that added it: 1.2's below) — the
// smallest struct_size a caller can have. A
// smaller one would cut a field in two (a pointer half copied is a wild pointer), so it is refused. When a field is
// added, this stays the 1.0 size (spelled out with the struct's last 1.0 field, as the structs that grew in 1.1 are)
// and args<T> reads the sizes in between as older versions.
#include <cuasync/cuasync.h>

#include <cstddef>

namespace cuasync::c_api {

template <class T>
inline constexpr std::size_t shipped_size_1_0 = 0;  // every args struct is listed below
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_queue_create_args> = CUASYNC_QUEUE_CREATE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_queue_destroy_args> = CUASYNC_QUEUE_DESTROY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_queue_fd_args> = CUASYNC_QUEUE_FD_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_queue_drain_args> = CUASYNC_QUEUE_DRAIN_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_host_token_create_args> = CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_host_token_complete_args> = CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_device_count_args> = CUASYNC_DEVICE_COUNT_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_runtime_create_args> = CUASYNC_RUNTIME_CREATE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_runtime_destroy_args> = CUASYNC_RUNTIME_DESTROY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_stream_create_args> = CUASYNC_STREAM_CREATE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_stream_destroy_args> = CUASYNC_STREAM_DESTROY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_stream_native_args> = CUASYNC_STREAM_NATIVE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_stream_wait_args> = CUASYNC_STREAM_WAIT_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_event_record_args> = CUASYNC_EVENT_RECORD_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_event_query_args> = CUASYNC_EVENT_QUERY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_event_wait_args> = CUASYNC_EVENT_WAIT_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_event_destroy_args> = CUASYNC_EVENT_DESTROY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_buffer_allocate_args> = CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_buffer_free_args> = CUASYNC_BUFFER_FREE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_copy_args> = CUASYNC_COPY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_memset_args> = CUASYNC_MEMSET_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_buffer_import_dlpack_args> =
    CUASYNC_STRUCT_SIZE(cuasync_buffer_import_dlpack_args, size);  // 1.1 appended `released`
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_buffer_export_dlpack_args> = CUASYNC_BUFFER_EXPORT_DLPACK_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_compile_args> = CUASYNC_COMPILE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_package_load_args> = CUASYNC_PACKAGE_LOAD_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_module_destroy_args> = CUASYNC_MODULE_DESTROY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_kernel_get_args> =
    CUASYNC_STRUCT_SIZE(cuasync_kernel_get_args, num_params);  // 1.1 appended `param_sizes*`
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_launch_args> =
    CUASYNC_STRUCT_SIZE(cuasync_launch_args, completion);  // 1.1 appended `flags`

// Structs that first shipped in ABI 1.2: their first version is their smallest.
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_library_version_args> = CUASYNC_LIBRARY_VERSION_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_admission_limits_args> = CUASYNC_ADMISSION_LIMITS_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_compile_image_args> = CUASYNC_COMPILE_IMAGE_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_image_destroy_args> = CUASYNC_IMAGE_DESTROY_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_log_sink_set_args> = CUASYNC_LOG_SINK_SET_ARGS_SIZE;

// Structs that first shipped in ABI 1.3.
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_flight_recorder_set_args> = CUASYNC_FLIGHT_RECORDER_SET_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_flight_recorder_dump_args> =
    CUASYNC_FLIGHT_RECORDER_DUMP_ARGS_SIZE;

// Structs that first shipped in ABI 1.5.
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_compile_image_start_args> =
    CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_compile_image_finish_args> =
    CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_graph_launch_args> = CUASYNC_GRAPH_LAUNCH_ARGS_SIZE;
// Structs that first shipped in ABI 1.6.
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_replay_anchor_mark_args> = CUASYNC_REPLAY_ANCHOR_MARK_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_replay_anchor_wait_args> = CUASYNC_REPLAY_ANCHOR_WAIT_ARGS_SIZE;
template <>
inline constexpr std::size_t shipped_size_1_0<cuasync_replay_anchor_destroy_args> =
    CUASYNC_REPLAY_ANCHOR_DESTROY_ARGS_SIZE;

}  // namespace cuasync::c_api
