// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The one exported symbol and the function table.
#include "calls.hpp"

#include <cuasync/driver/kernel_signature.hpp>

#include <cstddef>

namespace cuasync::c_api {

void error_info(cuasync_error_info_args* a) noexcept {
  if (!a || a->struct_size < CUASYNC_STRUCT_SIZE(cuasync_error_info_args, error)) return;
  static const char none[] = "no error (NULL)";
  cuasync_error_info_args out{};
  out.struct_size = a->struct_size;
  out.error = a->error;
  if (const cuasync_error* e = a->error) {
    out.code = e->code;
    out.cuda_result = e->cuda_result;
    out.nvrtc_result = e->nvrtc_result;
    out.message = e->message.c_str();
    out.message_size = e->message.size();
  } else {
    out.code = CUASYNC_OK;
    out.message = none;
    out.message_size = sizeof none - 1;
  }
  std::memcpy(a, &out, a->struct_size < sizeof out ? a->struct_size : sizeof out);
}

namespace {
constexpr cuasync_api table = {
    sizeof(cuasync_api), CUASYNC_ABI_MAJOR, CUASYNC_ABI_MINOR,
    destroy_error, error_info,
    queue_create, queue_destroy, queue_fd, queue_drain, host_token_create, host_token_complete,
    device_count, runtime_create, runtime_destroy, stream_create, stream_destroy, stream_native, stream_wait,
    event_record, event_query, event_wait, event_destroy,
    buffer_allocate, buffer_free, copy, memset,
    compile, module_destroy, kernel_get, launch, package_load,
    buffer_import_dlpack, buffer_export_dlpack,
    library_version, runtime_admission_get, runtime_admission_set, compile_image, image_destroy, log_sink_set,
    flight_recorder_set, flight_recorder_dump,
    compile_image_start, compile_image_finish, graph_launch,
    replay_anchor_mark, replay_anchor_wait, replay_anchor_destroy,
    queue_poll,
};
}  // namespace

}  // namespace cuasync::c_api

// The layout of ABI 1.0 as shipped (x86-64, LP64): a field added later goes at the end, never between. A change that
// moves any of these breaks every caller built against 1.0.
static_assert(sizeof(void*) == 8, "the pinned layouts below are those of LP64");
static_assert(CUASYNC_API_SIZE_1_0 == 8 + 4 + 4 + 30 * 8);
static_assert(offsetof(cuasync_api, error_destroy) == 16 && offsetof(cuasync_api, launch) == 16 + 26 * 8);
static_assert(CUASYNC_ERROR_INFO_ARGS_SIZE == 48);
static_assert(sizeof(cuasync_completion) == 32 && sizeof(cuasync_completion_record) == 16);
static_assert(CUASYNC_QUEUE_CREATE_ARGS_SIZE == 24 && CUASYNC_QUEUE_DRAIN_ARGS_SIZE == 40);
static_assert(CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE == 48 && CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE == 20);
static_assert(CUASYNC_RUNTIME_CREATE_ARGS_SIZE == 32 && CUASYNC_STREAM_CREATE_ARGS_SIZE == 40);
static_assert(CUASYNC_STREAM_WAIT_ARGS_SIZE == 48 && CUASYNC_EVENT_QUERY_ARGS_SIZE == 20);
static_assert(CUASYNC_BUFFER_ALLOCATE_ARGS_SIZE == 56 && CUASYNC_COPY_ARGS_SIZE == 72);
static_assert(CUASYNC_MEMSET_ARGS_SIZE == 72 && CUASYNC_COMPILE_ARGS_SIZE == 88);
static_assert(cuasync::c_api::shipped_size_1_0<cuasync_kernel_get_args> == 40 &&
              cuasync::c_api::shipped_size_1_0<cuasync_launch_args> == 104);
static_assert(sizeof(cuasync_kernel_arg) == 16 && sizeof(cuasync_header) == 16);
static_assert(CUASYNC_PACKAGE_LOAD_ARGS_SIZE == 40);
static_assert(cuasync::c_api::shipped_size_1_0<cuasync_buffer_import_dlpack_args> == 56 &&
              CUASYNC_BUFFER_EXPORT_DLPACK_ARGS_SIZE == 56);

// ABI 1.1: fields appended to three structs (the 1.0 part above unchanged).
static_assert(CUASYNC_API_SIZE_1_1 == CUASYNC_API_SIZE_1_0);
static_assert(offsetof(cuasync_launch_args, flags) == 104 && CUASYNC_STRUCT_SIZE(cuasync_launch_args, flags) == 108);
static_assert(offsetof(cuasync_kernel_get_args, param_sizes) == 40 &&
              offsetof(cuasync_kernel_get_args, param_sizes_capacity) == 48 &&
              CUASYNC_STRUCT_SIZE(cuasync_kernel_get_args, param_sizes_capacity) == 56);
static_assert(offsetof(cuasync_buffer_import_dlpack_args, released) == 56 &&
              CUASYNC_BUFFER_IMPORT_DLPACK_ARGS_SIZE == 88);

// ABI 1.2: six functions appended to the table (the 1.0 part above unchanged), and their structs.
static_assert(offsetof(cuasync_api, library_version) == CUASYNC_API_SIZE_1_0 &&
              CUASYNC_API_SIZE_1_2 == CUASYNC_API_SIZE_1_0 + 6 * 8);
static_assert(CUASYNC_LIBRARY_VERSION_ARGS_SIZE == 32 && CUASYNC_ADMISSION_LIMITS_ARGS_SIZE == 24);
static_assert(offsetof(cuasync_compile_image_args, image) == 80 && offsetof(cuasync_compile_image_args, kind) == 104 &&
              CUASYNC_COMPILE_IMAGE_ARGS_SIZE == 144);
static_assert(CUASYNC_IMAGE_DESTROY_ARGS_SIZE == 16 && CUASYNC_LOG_SINK_SET_ARGS_SIZE == 28);
// ABI 1.3: two functions appended (the flight recorder), and their structs.
static_assert(offsetof(cuasync_api, flight_recorder_set) == CUASYNC_API_SIZE_1_2 &&
              CUASYNC_API_SIZE_1_3 == CUASYNC_API_SIZE_1_2 + 2 * 8);
static_assert(CUASYNC_FLIGHT_RECORDER_SET_ARGS_SIZE == 28 && CUASYNC_FLIGHT_RECORDER_DUMP_ARGS_SIZE == 48);
// ABI 1.4: typed arguments, fields appended to two structs (no function).
static_assert(CUASYNC_API_SIZE_1_4 == CUASYNC_API_SIZE_1_3);
static_assert(offsetof(cuasync_launch_args, arg_types) == 112 && CUASYNC_LAUNCH_ARGS_SIZE == 120);
static_assert(offsetof(cuasync_kernel_get_args, param_types) == 56 &&
              offsetof(cuasync_kernel_get_args, param_types_capacity) == 64 &&
              offsetof(cuasync_kernel_get_args, param_type_names) == 72 &&
              offsetof(cuasync_kernel_get_args, typed) == 80 && CUASYNC_KERNEL_GET_ARGS_SIZE == 84);
// ABI 1.5: three functions appended (compiles that complete like GPU work, awaited graph replays), and their structs.
static_assert(offsetof(cuasync_api, compile_image_start) == CUASYNC_API_SIZE_1_4 &&
              CUASYNC_API_SIZE_1_5 == CUASYNC_API_SIZE_1_4 + 3 * 8);
static_assert(CUASYNC_GRAPH_LAUNCH_ARGS_SIZE == 56 && offsetof(cuasync_graph_launch_args, completion) == 24);
static_assert(offsetof(cuasync_compile_image_start_args, completion) == 16 &&
              CUASYNC_COMPILE_IMAGE_START_ARGS_SIZE == 56 && CUASYNC_COMPILE_IMAGE_FINISH_ARGS_SIZE == 24);
// ABI 1.6: three functions appended (awaited replays of the caller's graphs: replay anchors), and their structs.
static_assert(offsetof(cuasync_api, replay_anchor_mark) == CUASYNC_API_SIZE_1_5 &&
              CUASYNC_API_SIZE_1_6 == CUASYNC_API_SIZE_1_5 + 3 * 8);
static_assert(CUASYNC_REPLAY_ANCHOR_MARK_ARGS_SIZE == 32 && CUASYNC_REPLAY_ANCHOR_DESTROY_ARGS_SIZE == 16 &&
              offsetof(cuasync_replay_anchor_wait_args, completion) == 24 &&
              CUASYNC_REPLAY_ANCHOR_WAIT_ARGS_SIZE == 64);
// ABI 1.7: one function appended (queue_poll, on queue_drain's struct: no struct added).
static_assert(CUASYNC_ABI_MAJOR == 1 && CUASYNC_ABI_MINOR == 7);
static_assert(offsetof(cuasync_api, queue_poll) == CUASYNC_API_SIZE_1_6 &&
              CUASYNC_API_SIZE_1_7 == CUASYNC_API_SIZE_1_6 + 8 && sizeof(cuasync_api) == CUASYNC_API_SIZE_1_7);
// The codes are the driver layer's type_code bits with bit 24 set (calls_jit.cpp converts with that alone).
static_assert(CUASYNC_ARG_F32 == (cuasync::type_code_of<float>().bits | 1u << 24) &&
              CUASYNC_ARG_POINTER_TO(CUASYNC_ARG_F64) == (cuasync::type_code_of<double*>().bits | 1u << 24) &&
              CUASYNC_ARG_VOID_POINTER == (cuasync::type_code_of<void*>().bits | 1u << 24) &&
              CUASYNC_ARG_BOOL == (cuasync::type_code_of<bool>().bits | 1u << 24) &&
              CUASYNC_ARG_I64 == (cuasync::type_code_of<long long>().bits | 1u << 24));
// The DLPack layouts the header declares (DLPack 1.x, LP64).
static_assert(sizeof(cuasync_dlpack_version) == 8 && sizeof(cuasync_dl_device) == 8 &&
              sizeof(cuasync_dl_data_type) == 4);
static_assert(sizeof(cuasync_dl_tensor) == 48 && offsetof(cuasync_dl_tensor, ndim) == 16 &&
              offsetof(cuasync_dl_tensor, dtype) == 20 && offsetof(cuasync_dl_tensor, byte_offset) == 40);
static_assert(sizeof(cuasync_dl_managed_tensor_versioned) == 80 &&
              offsetof(cuasync_dl_managed_tensor_versioned, flags) == 24 &&
              offsetof(cuasync_dl_managed_tensor_versioned, dl_tensor) == 32);

extern "C" __attribute__((visibility("default"))) cuasync_error* cuasync_get_api(uint32_t major,
                                                                                 const cuasync_api** api) {
  if (!api) return cuasync::c_api::no_table_error();  // static: nothing for the caller to free
  *api = &cuasync::c_api::table;
  if (major != CUASYNC_ABI_MAJOR)
    return cuasync::c_api::make_error(CUASYNC_ERROR_UNSUPPORTED,
                                      "cuasync_get_api: this library implements ABI " +
                                          std::to_string(CUASYNC_ABI_MAJOR) + "." + std::to_string(CUASYNC_ABI_MINOR) +
                                          ", not major version " + std::to_string(major));
  return nullptr;
}
