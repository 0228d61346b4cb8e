// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The compile farm's frames (farm_protocol.hpp): encoding, incremental parsing, blocking I/O for the worker.
#include "farm_protocol.hpp"

#include "byte_codec.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace cuasync::jit::detail::farm {
namespace {

constexpr std::uint32_t magic = 0x57464a43;  // "CJFW"

struct header {
  std::uint32_t magic;
  std::uint32_t type;
  std::uint64_t id;
  std::uint64_t size;
  std::uint64_t aux;
};
static_assert(sizeof(header) == frame_header_size);

bool valid_type(std::uint32_t t) { return t >= 1 && t <= 4; }

}  // namespace

std::string encode(const frame& f) {
  const header h{magic, static_cast<std::uint32_t>(f.type), f.id, f.payload.size(), f.aux};
  std::string out(reinterpret_cast<const char*>(&h), sizeof h);
  out += f.payload;
  return out;
}

std::optional<frame> frame_parser::next(std::string& error) {
  if (buffer_.size() < sizeof(header)) return std::nullopt;
  header h{};
  std::memcpy(&h, buffer_.data(), sizeof h);
  if (h.magic != magic || !valid_type(h.type) || h.size > max_payload) {
    error = "not a farm frame (magic " + std::to_string(h.magic) + ", type " + std::to_string(h.type) + ")";
    return std::nullopt;
  }
  if (buffer_.size() - sizeof h < h.size) return std::nullopt;
  frame f{static_cast<frame_type>(h.type), h.id, h.aux, buffer_.substr(sizeof h, h.size)};
  buffer_.erase(0, sizeof h + h.size);
  return f;
}

namespace {
// Reads exactly n bytes; false at end of stream (error empty when nothing was read) or on error.
bool read_exact(int fd, char* p, std::size_t n, std::string& error, bool& got_any) {
  std::size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, p + done, n - done);
    if (r > 0) {
      done += static_cast<std::size_t>(r);
      got_any = true;
    } else if (r == 0) {
      if (got_any) error = "the stream ended inside a frame";
      return false;
    } else if (errno != EINTR) {
      error = std::string("read failed: ") + std::strerror(errno);
      return false;
    }
  }
  return true;
}
}  // namespace

bool read_frame(int fd, frame& out, std::string& error) {
  error.clear();
  header h{};
  bool got_any = false;
  if (!read_exact(fd, reinterpret_cast<char*>(&h), sizeof h, error, got_any)) return false;
  if (h.magic != magic || !valid_type(h.type) || h.size > max_payload) {
    error = "not a farm frame";
    return false;
  }
  out.type = static_cast<frame_type>(h.type);
  out.id = h.id;
  out.aux = h.aux;
  out.payload.resize(h.size);
  if (h.size && !read_exact(fd, out.payload.data(), h.size, error, got_any)) {
    if (error.empty()) error = "the stream ended inside a frame";
    return false;
  }
  return true;
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t r = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (r > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(r));
    } else if (r < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

std::string encode_request(const cache_key& key, const program& p, const target& t,
                           const std::vector<std::string>& arguments) {
  byte_writer w;
  w.value(key.low);
  w.value(key.high);
  w.value(static_cast<std::uint8_t>(t.kind));
  w.value(static_cast<std::int32_t>(t.arch));
  w.str(p.name());
  w.str(p.source());
  w.value(static_cast<std::uint64_t>(p.headers().size()));
  for (const auto& [name, contents] : p.headers()) {
    w.str(name);
    w.str(contents);
  }
  w.value(static_cast<std::uint64_t>(p.name_expressions().size()));
  for (const auto& e : p.name_expressions()) w.str(e);
  w.value(static_cast<std::uint64_t>(arguments.size()));
  for (const auto& a : arguments) w.str(a);
  return std::move(w.out);
}

std::optional<compile_request> decode_request(std::string_view payload, std::string& why) {
  byte_reader r{payload};
  compile_request out;
  out.key.low = r.value<std::uint64_t>();
  out.key.high = r.value<std::uint64_t>();
  const auto kind = r.value<std::uint8_t>();
  out.t.arch = r.value<std::int32_t>();
  std::string name = r.str();
  std::string source = r.str();
  out.source = program(std::move(name), std::move(source));
  for (std::uint64_t i = 0, n = r.count(); i < n && r.ok; ++i) {
    std::string header_name = r.str();
    std::string contents = r.str();
    out.source.add_header(std::move(header_name), std::move(contents));
  }
  for (std::uint64_t i = 0, n = r.count(); i < n && r.ok; ++i) {
    std::string e = r.str();
    if (e.empty()) r.ok = false;
    if (r.ok) out.source.add_name_expression(std::move(e));
  }
  for (std::uint64_t i = 0, n = r.count(); i < n && r.ok; ++i) out.arguments.push_back(r.str());
  if (!r.ok || !r.in.empty() || kind > static_cast<std::uint8_t>(output_kind::ltoir)) {
    why = "malformed compile request";
    return std::nullopt;
  }
  out.t.kind = static_cast<output_kind>(kind);
  return out;
}

std::string encode_hello(const worker_hello& h) {
  byte_writer w;
  w.value(static_cast<std::uint8_t>(h.ok));
  w.value(static_cast<std::int32_t>(h.nvrtc_major));
  w.value(static_cast<std::int32_t>(h.nvrtc_minor));
  w.str(h.library);
  w.str(h.error);
  return std::move(w.out);
}

std::optional<worker_hello> decode_hello(std::string_view payload) {
  byte_reader r{payload};
  worker_hello h;
  h.ok = r.value<std::uint8_t>() != 0;
  h.nvrtc_major = r.value<std::int32_t>();
  h.nvrtc_minor = r.value<std::int32_t>();
  h.library = r.str();
  h.error = r.str();
  if (!r.ok || !r.in.empty()) return std::nullopt;
  return h;
}

std::string encode_failure(const compile_failure& f) {
  byte_writer w;
  w.value(static_cast<std::uint8_t>(f.what));
  w.value(f.result);
  w.str(f.api);
  w.str(f.message);
  w.str(f.log);
  w.str(f.first_error);
  return std::move(w.out);
}

std::optional<compile_failure> decode_failure(std::string_view payload) {
  byte_reader r{payload};
  compile_failure f;
  const auto kind = r.value<std::uint8_t>();
  f.result = r.value<std::int32_t>();
  f.api = r.str();
  f.message = r.str();
  f.log = r.str();
  f.first_error = r.str();
  if (!r.ok || !r.in.empty() || kind > static_cast<std::uint8_t>(compile_failure::kind::other)) return std::nullopt;
  f.what = static_cast<compile_failure::kind>(kind);
  return f;
}

}  // namespace cuasync::jit::detail::farm
