// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// libFuzzer: the C ABI's argument decoding, as a buggy or hostile host would call it. The input picks a call and
// fills its arguments struct byte for byte (struct_size included: smaller, larger, with or without an unknown tail),
// except for pointer fields, which point at valid memory (a caller's wild pointer is its own fault). Handles are
// whatever the bytes say: made up, stale, of another kind. Every call must return NULL or an error with a message.
#include <cuasync/cuasync.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {
const cuasync_api* table() {
  static const cuasync_api* api = [] {
    const cuasync_api* a = nullptr;
    if (cuasync_error* e = cuasync_get_api(CUASYNC_ABI_MAJOR, &a)) a->error_destroy(e);
    return a;
  }();
  return api;
}

void check(const cuasync_api* api, cuasync_error* e) {
  if (!e) return;
  cuasync_error_info_args info{};
  info.struct_size = sizeof info;
  info.error = e;
  api->error_info(&info);
  if (!info.message || info.message_size == 0) std::abort();  // every error says what it is
  api->error_destroy(e);
}

// Fills `args` (of `size` bytes, rounded up to 256 bytes of storage) from the input; struct_size from its first bytes.
template <class T>
T* fill(std::vector<unsigned char>& storage, const std::uint8_t* data, std::size_t size) {
  storage.assign(256, 0);
  std::memcpy(storage.data(), data, std::min<std::size_t>(size, storage.size()));
  auto* a = reinterpret_cast<T*>(storage.data());
  // struct_size within the storage (the caller's struct is that long).
  a->struct_size = a->struct_size % (storage.size() + 1);
  return a;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const cuasync_api* api = table();
  if (!api || size < 2) return 0;
  const std::uint8_t which = data[0];
  ++data, --size;
  std::vector<unsigned char> s;
  static cuasync_completion_record records[8];
  static char text[] = "package fuzz\n";
  switch (which % 19) {
    case 0: {
      auto* a = fill<cuasync_queue_create_args>(s, data, size);
      check(api, api->queue_create(a));
      if (a->struct_size >= CUASYNC_QUEUE_CREATE_ARGS_SIZE && a->queue) {  // destroyed again: no queue leaks
        cuasync_queue_destroy_args d{CUASYNC_QUEUE_DESTROY_ARGS_SIZE, a->queue};
        check(api, api->queue_destroy(&d));
      }
      break;
    }
    case 1: check(api, api->queue_destroy(fill<cuasync_queue_destroy_args>(s, data, size))); break;
    case 2: check(api, api->queue_fd(fill<cuasync_queue_fd_args>(s, data, size))); break;
    case 3: {
      auto* a = fill<cuasync_queue_drain_args>(s, data, size);
      a->records = records;
      a->capacity %= 9;
      check(api, (which / 19) % 2 ? api->queue_poll(a) : api->queue_drain(a));  // ABI 1.7's look, then the drain
      break;
    }
    case 4: {
      auto* a = fill<cuasync_host_token_create_args>(s, data, size);
      a->completion.callback = nullptr;  // a callback pointer would be the caller's code
      check(api, api->host_token_create(a));
      if (a->struct_size >= CUASYNC_HOST_TOKEN_CREATE_ARGS_SIZE && a->token) {
        cuasync_host_token_complete_args c{CUASYNC_HOST_TOKEN_COMPLETE_ARGS_SIZE, a->token, CUASYNC_OK};
        check(api, api->host_token_complete(&c));
      }
      break;
    }
    case 5: check(api, api->host_token_complete(fill<cuasync_host_token_complete_args>(s, data, size))); break;
    case 6: check(api, api->stream_destroy(fill<cuasync_stream_destroy_args>(s, data, size))); break;
    case 7: check(api, api->event_destroy(fill<cuasync_event_destroy_args>(s, data, size))); break;
    case 8: {
      auto* a = fill<cuasync_package_load_args>(s, data, size);
      a->directory = "/nonexistent-cuasync-fuzz";
      check(api, api->package_load(a));
      (void)text;
      break;
    }
    // ABI 1.2: handles and values as the bytes say (compile_image is left out: every input would run NVRTC).
    case 9: check(api, api->library_version(fill<cuasync_library_version_args>(s, data, size))); break;
    case 10: check(api, api->runtime_admission_get(fill<cuasync_admission_limits_args>(s, data, size))); break;
    case 11: check(api, api->runtime_admission_set(fill<cuasync_admission_limits_args>(s, data, size))); break;
    case 12: check(api, api->image_destroy(fill<cuasync_image_destroy_args>(s, data, size))); break;
    case 13: {
      auto* a = fill<cuasync_log_sink_set_args>(s, data, size);
      a->sink = nullptr;  // a made-up function pointer is the caller's own fault
      check(api, api->log_sink_set(a));
      cuasync_log_sink_set_args off{CUASYNC_LOG_SINK_SET_ARGS_SIZE, nullptr, nullptr, CUASYNC_LOG_OFF};
      check(api, api->log_sink_set(&off));  // quiet again for the next input
      break;
    }
    // ABI 1.5 (compile_image_start is left out, as compile_image: every input would run NVRTC). The graph_exec is
    // handed to the driver only for a live stream, which no input names.
    case 14: check(api, api->graph_launch(fill<cuasync_graph_launch_args>(s, data, size))); break;
    case 15: {
      auto* a = fill<cuasync_compile_image_finish_args>(s, data, size);
      cuasync_compile_image_args result{};
      result.struct_size = sizeof result;
      a->result = (data[0] & 1) ? &result : nullptr;
      check(api, api->compile_image_finish(a));
      break;
    }
    // ABI 1.6 (replay_anchor_mark is left out: it needs a stream being captured, which no input names).
    case 16: {
      auto* a = fill<cuasync_replay_anchor_wait_args>(s, data, size);
      a->completion.callback = nullptr;  // a callback pointer would be the caller's code
      check(api, api->replay_anchor_wait(a));
      break;
    }
    case 17: check(api, api->replay_anchor_destroy(fill<cuasync_replay_anchor_destroy_args>(s, data, size))); break;
    default: {
      auto* a = fill<cuasync_launch_args>(s, data, size);
      a->args = nullptr;
      a->num_args = 0;
      check(api, api->launch(a));
      break;
    }
  }
  return 0;
}
