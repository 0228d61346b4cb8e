// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to jit/: the frames the compile farm's parent and its workers exchange over one socket per worker. A frame
// is a fixed header (magic, type, request id, payload size, aux) and a payload. The parent sends requests (the
// program, the target, NVRTC's argument list as the parent computed it, the cache key); a worker answers each with a
// result, whose payload is the disk cache's entry encoding (disk_cache::serialize: checksummed, and decoded by
// detail::decode_entry against the key), or a failure (what jit::compile threw). A worker starts with a hello.
#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/program.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cuasync::jit::detail::farm {

enum class frame_type : std::uint32_t { hello = 1, request = 2, result = 3, failure = 4 };

struct frame {
  frame_type type = frame_type::hello;
  std::uint64_t id = 0;   // the request's id (0 for hello)
  std::uint64_t aux = 0;  // worker -> parent: the worker's peak resident set, bytes
  std::string payload;
};

constexpr std::size_t frame_header_size = 32;
constexpr std::uint64_t max_payload = std::uint64_t{1} << 31;  // far above any program or image

//! The header and the payload, ready to write.
std::string encode(const frame& f);

//! Frames out of a byte stream read in pieces (the parent's non-blocking sockets).
class frame_parser {
 public:
  void feed(const char* data, std::size_t n) { buffer_.append(data, n); }
  //! The next whole frame, or nothing yet; sets `error` (and returns nothing) for a stream that is not frames.
  std::optional<frame> next(std::string& error);

 private:
  std::string buffer_;
};

//! Blocking reads and writes (the worker's side). `read_frame` returns false at end of stream or on error (`error` is
//! empty at a clean end of stream).
bool read_frame(int fd, frame& out, std::string& error);
bool write_all(int fd, std::string_view bytes);

//! What a worker compiles.
struct compile_request {
  cache_key key;
  program source{"", ""};
  target t;
  std::vector<std::string> arguments;
};
std::string encode_request(const cache_key& key, const program& p, const target& t,
                           const std::vector<std::string>& arguments);
std::optional<compile_request> decode_request(std::string_view payload, std::string& why);

//! A worker's first frame: its NVRTC, or why it has none.
struct worker_hello {
  bool ok = false;
  int nvrtc_major = 0, nvrtc_minor = 0;
  std::string library;  // the NVRTC it loaded
  std::string error;    // why not, when !ok
};
std::string encode_hello(const worker_hello& h);
std::optional<worker_hello> decode_hello(std::string_view payload);

//! What a failed compile threw in the worker, to throw the same in the parent.
struct compile_failure {
  enum class kind : std::uint8_t { compile, nvrtc_not_found, nvrtc_call, other };
  kind what = kind::other;
  std::int32_t result = 0;  // the nvrtcResult
  std::string api, message, log, first_error;
};
std::string encode_failure(const compile_failure& f);
std::optional<compile_failure> decode_failure(std::string_view payload);

}  // namespace cuasync::jit::detail::farm
