// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The process-wide recorder: per-thread span buffers merged at export, a cap counted with one atomic, the
// environment's CUASYNC_TRACE read at static initialization and the write at exit.
#include <cuasync/trace/recorder.hpp>

#include <cuasync/trace/chrome_json.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/html.hpp>

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace cuasync::trace {

namespace {

// One per recording thread. Its mutex is taken by its own thread for each record and by exports: uncontended except
// while an export copies it. Spans go into fixed chunks that never move: a growing vector would copy every span
// recorded so far, on the recording thread (tens of milliseconds at a million spans), and touch fresh pages twice.
struct thread_buffer {
  static constexpr std::size_t chunk_spans = 1024;
  std::mutex mutex;
  std::vector<std::vector<span>> chunks;

  void push(span&& s) {
    if (chunks.empty() || chunks.back().size() == chunk_spans) {
      chunks.emplace_back();
      chunks.back().reserve(chunk_spans);
    }
    chunks.back().push_back(std::move(s));
  }
};

struct registry {
  std::mutex mutex;  // guards everything below that is not atomic
  std::vector<std::shared_ptr<thread_buffer>> buffers;
  std::vector<lane_info> names;
  std::vector<device_info> devices;
  std::atomic<std::uint64_t> described{0};  // bit d: device d (< 64) was described
  options opts;
  std::int64_t origin_ns = 0;
  bool origin_set = false;
  bool at_exit_registered = false;

  std::atomic<std::size_t> admitted{0};  // spans that asked to be recorded since the last clear(), dropped ones too
  std::atomic<std::size_t> cap{options{}.max_records};
  std::atomic<std::uint64_t> dropped{0};
  std::atomic<std::uint64_t> next_thread{1};
};

// Never destroyed: the at-exit write and threads that record late in the process's exit outlive static destructors.
registry& the_registry() {
  static registry* r = new registry;
  return *r;
}

struct thread_state {
  std::shared_ptr<thread_buffer> buffer;  // shared with the registry, so the spans outlive the thread
  std::uint64_t ordinal = 0;
};
thread_local thread_state this_thread;

thread_buffer& this_thread_buffer() {
  if (!this_thread.buffer) {
    auto buffer = std::make_shared<thread_buffer>();
    registry& r = the_registry();
    std::lock_guard lock(r.mutex);
    r.buffers.push_back(buffer);
    this_thread.buffer = std::move(buffer);
  }
  return *this_thread.buffer;
}

// Cuts at a UTF-8 character boundary so that the exporters never write half a character.
void cut(std::string& text) {
  if (text.size() <= max_text_bytes) return;
  std::size_t n = max_text_bytes;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  text.resize(n);
}

void set_name_locked(registry& r, const lane& l, std::string name) {
  for (lane_info& info : r.names)
    if (info.lane == l) {
      info.name = std::move(name);
      return;
    }
  r.names.push_back({l, std::move(name)});
}

void write_at_exit() noexcept {
  registry& r = the_registry();
  if (r.admitted.load() == 0) return;  // nothing recorded: leave an earlier trace at that path alone
  try {
    const std::filesystem::path path = current_options().output;
    if (path.empty()) return;
    const timeline t = snapshot();
    write_file(t, path);
    std::string dropped;
    if (t.dropped) dropped = " (" + std::to_string(t.dropped) + " dropped at the cap)";
    std::fprintf(stderr, "cuasync trace: %zu spans written to %s%s\n", t.spans.size(), path.c_str(), dropped.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuasync trace: %s\n", e.what());
  }
}

// CUASYNC_TRACE=path turns recording on before main (in any program that links the recorder); "" and "0" leave it
// off. CUASYNC_TRACE_MAX_RECORDS sets the cap.
bool enable_from_environment() noexcept {
  const char* path = std::getenv("CUASYNC_TRACE");
  if (!path || !*path || !std::strcmp(path, "0")) return false;
  options o;
  o.output = path;
  if (const char* cap = std::getenv("CUASYNC_TRACE_MAX_RECORDS")) {
    std::size_t n = 0;
    const char* end = cap + std::strlen(cap);
    if (auto [p, ec] = std::from_chars(cap, end, n); ec == std::errc{} && p == end) o.max_records = n;
  }
  try {
    enable(o);
    return true;
  } catch (...) {
    return false;
  }
}
[[maybe_unused]] const bool enabled_by_environment = enable_from_environment();

}  // namespace

void enable(const options& o) {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  r.opts = o;
  r.cap.store(std::max<std::size_t>(o.max_records, 1), std::memory_order_relaxed);
  if (!r.origin_set) {
    r.origin_ns = now_ns();
    r.origin_set = true;
  }
  if (!o.output.empty() && !r.at_exit_registered) r.at_exit_registered = std::atexit(write_at_exit) == 0;
  detail::hooks.fetch_or(hook::record, std::memory_order_relaxed);
}

void disable() noexcept { detail::hooks.fetch_and(~hook::record, std::memory_order_relaxed); }

options current_options() {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  return r.opts;
}

void record(span s) noexcept {
  if (!enabled()) return;
  registry& r = the_registry();
  if (r.admitted.fetch_add(1, std::memory_order_relaxed) >= r.cap.load(std::memory_order_relaxed)) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  try {
    if (s.end_ns < s.begin_ns) std::swap(s.begin_ns, s.end_ns);
    cut(s.name);
    cut(s.label);
    thread_buffer& buffer = this_thread_buffer();
    std::lock_guard lock(buffer.mutex);
    buffer.push(std::move(s));
  } catch (...) {
    r.dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

lane this_thread_lane() noexcept {
  if (this_thread.ordinal == 0) {
    registry& r = the_registry();
    this_thread.ordinal = r.next_thread.fetch_add(1, std::memory_order_relaxed);
    char os_name[16] = {};
    if (pthread_getname_np(pthread_self(), os_name, sizeof os_name) == 0 && os_name[0]) try {
        const lane l = lane::host_thread(this_thread.ordinal);
        std::lock_guard lock(r.mutex);
        if (std::none_of(r.names.begin(), r.names.end(), [&](const lane_info& i) { return i.lane == l; }))
          r.names.push_back({l, "thread " + std::to_string(this_thread.ordinal) + ": " + os_name});
      } catch (...) {
        // Without the name the lane keeps its default one.
      }
  }
  return lane::host_thread(this_thread.ordinal);
}

std::uint64_t new_flow_id() noexcept {
  // Below 2^53, so that JSON readers holding numbers as doubles (Perfetto's) keep it exact; the ordinal is >= 1, so
  // the id is never 0 even when the count wraps.
  thread_local std::uint32_t count = 0;
  return (this_thread_lane().id & 0x1F'FFFF) << 32 | ++count;
}

void name_lane(const lane& l, std::string name) {
  registry& r = the_registry();
  cut(name);
  std::lock_guard lock(r.mutex);
  set_name_locked(r, l, std::move(name));
}

void name_this_thread(std::string name) { name_lane(this_thread_lane(), std::move(name)); }

void describe_device(device_info d) {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  if (d.device >= 0 && d.device < 64) r.described.fetch_or(std::uint64_t{1} << d.device, std::memory_order_relaxed);
  for (device_info& known : r.devices)
    if (known.device == d.device) {
      known = std::move(d);
      return;
    }
  r.devices.push_back(std::move(d));
  std::sort(r.devices.begin(), r.devices.end(), [](const device_info& a, const device_info& b) { return a.device < b.device; });
}

bool device_described(int ordinal) noexcept {
  registry& r = the_registry();
  if (ordinal >= 0 && ordinal < 64)
    return (r.described.load(std::memory_order_relaxed) >> ordinal) & 1;
  std::lock_guard lock(r.mutex);
  return std::any_of(r.devices.begin(), r.devices.end(), [&](const device_info& d) { return d.device == ordinal; });
}

namespace {
std::atomic<void (*)()> gpu_span_drain{nullptr};
}  // namespace

void detail::set_gpu_span_drain(void (*drain)()) noexcept { gpu_span_drain.store(drain); }

timeline snapshot() {
  if (auto drain = gpu_span_drain.load()) drain();
  registry& r = the_registry();
  timeline t;
  std::vector<std::shared_ptr<thread_buffer>> buffers;
  std::vector<lane_info> names;
  {
    std::lock_guard lock(r.mutex);
    buffers = r.buffers;
    names = r.names;
    t.devices = r.devices;
    t.origin_ns = r.origin_ns;
  }
  t.pid = static_cast<std::int64_t>(getpid());
  for (const auto& buffer : buffers) {
    std::lock_guard lock(buffer->mutex);
    for (const auto& chunk : buffer->chunks) t.spans.insert(t.spans.end(), chunk.begin(), chunk.end());
  }
  // Named lanes without spans are left out: a snapshot shows what ran.
  std::vector<lane> used;
  for (const span& s : t.spans) used.push_back(s.lane);
  std::sort(used.begin(), used.end());
  for (lane_info& info : names)
    if (std::binary_search(used.begin(), used.end(), info.lane)) t.lanes.push_back(std::move(info));
  t.dropped = r.dropped.load(std::memory_order_relaxed);
  t.normalize();
  return t;
}

void clear() noexcept {
  registry& r = the_registry();
  std::lock_guard lock(r.mutex);
  for (const auto& buffer : r.buffers) {
    std::lock_guard buffer_lock(buffer->mutex);
    std::vector<std::vector<span>>().swap(buffer->chunks);  // give the memory back, not only the elements
  }
  r.admitted.store(0, std::memory_order_relaxed);
  r.dropped.store(0, std::memory_order_relaxed);
  r.origin_ns = now_ns();
  r.origin_set = true;
}

std::filesystem::path flush() {
  const std::filesystem::path path = current_options().output;
  if (path.empty()) return {};
  write_file(snapshot(), path);
  return path;
}

void write_file(const timeline& t, const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("cannot open " + path.string() + " to write the trace");
  if (path.extension() == ".html")
    write_html(t, out);
  else
    write_chrome_json(t, out);
  out.flush();
  if (!out) throw std::runtime_error("cannot write the trace to " + path.string());
}

}  // namespace cuasync::trace
