// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The driver's log lines (cuLogsRegisterCallback, CUDA 12.9+): kept in a small process-wide ring with the thread that
// produced each, so that the error a failed call throws on that thread can carry them (driver_log.hpp).
#include <cuasync/driver/detail/driver_api.hpp>
#include <cuasync/driver/driver_log.hpp>
#include <cuasync/log.hpp>

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>

namespace cuasync {
namespace {

using clock_type = std::chrono::steady_clock;
// A line older than this when an error is thrown belongs to an earlier call whose failure was handled, not thrown.
constexpr auto stale_after = std::chrono::seconds(1);

struct line {
  pid_t tid;               // the thread the callback ran on
  pid_t named_tid;         // the thread the text names ("[time][tid][...]"), 0 if none
  clock_type::time_point at;
  std::string text;
  std::string entry;       // the entry point the text names ("[cuMemAlloc_v2]"), empty if none
  bool taken = false;
};

struct ring {
  std::mutex m;
  std::deque<line> lines;
};
// Leaked: the driver may log while the process exits, after static destructors have run.
ring& the_ring() {
  static ring* r = new ring;
  return *r;
}
std::atomic<bool> registered{false};
std::atomic<const char*> state{"not set up (no driver loaded)"};

// Reads the bracketed fields the driver starts a line with: "[22:21:32.099][25642][CUDA][E][cuCtxCreate] text".
void parse_fields(std::string_view text, pid_t& named_tid, std::string& entry) {
  std::size_t pos = 0;
  for (int field = 0; pos < text.size() && text[pos] == '['; ++field) {
    const std::size_t end = text.find(']', pos);
    if (end == std::string_view::npos) return;
    const std::string_view f = text.substr(pos + 1, end - pos - 1);
    const bool digits = !f.empty() && f.find_first_not_of("0123456789") == std::string_view::npos;
    if (digits && f.size() < 10 && !named_tid && field > 0)
      named_tid = static_cast<pid_t>(std::atoi(std::string(f).c_str()));
    if (f.size() > 2 && f[0] == 'c' && f[1] == 'u' && f[2] >= 'A' && f[2] <= 'Z') entry = f;
    pos = end + 1;
  }
}

void CUDA_CB on_driver_log(void*, CUlogLevel level, char* message, size_t length) {
  try {
    if (!message) return;
    // The length is the driver's; should it give none, the text is taken as NUL-terminated (within 4 KiB).
    std::string_view text(message, ::strnlen(message, length ? length : 4096));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == '\0')) text.remove_suffix(1);
    if (text.empty()) return;
    line l{::gettid(), 0, clock_type::now(), {}, {}, false};
    parse_fields(text, l.named_tid, l.entry);
    if (text.size() > driver_log::max_line_bytes) text = text.substr(0, driver_log::max_line_bytes);
    l.text = (level == CU_LOG_LEVEL_WARNING ? "warning: " : "") + std::string(text);
    ring& r = the_ring();
    std::lock_guard lock(r.m);
    r.lines.push_back(std::move(l));
    while (r.lines.size() > driver_log::max_lines) r.lines.pop_front();
  } catch (...) {
    // Out of memory inside the driver's call: the line is lost, the call's own result still says what failed.
  }
}

// The driver names versioned entry points ("cuMemAlloc_v2"); cuasync names the call ("cuMemAlloc").
bool same_entry(std::string_view driver_name, std::string_view api) {
  if (driver_name.empty()) return true;
  if (api.size() < 3 || api[0] != 'c' || api[1] != 'u' || api[2] < 'A' || api[2] > 'Z') return true;  // not a CUDA call
  return driver_name == api || (driver_name.size() > api.size() && driver_name.substr(0, api.size()) == api &&
                                driver_name[api.size()] == '_');
}

}  // namespace

namespace driver_log {

bool available() noexcept { return registered.load(std::memory_order_acquire); }

std::vector<std::string> recent() {
  std::vector<std::string> out;
  ring& r = the_ring();
  std::lock_guard lock(r.m);
  out.reserve(r.lines.size());
  for (const line& l : r.lines) out.push_back(l.text);
  return out;
}

}  // namespace driver_log

namespace detail {

void install_driver_log(const driver_entry_points& d) noexcept {
  if (const char* env = std::getenv("CUASYNC_DRIVER_LOG"); env && std::strcmp(env, "0") == 0) {
    state.store("off (CUASYNC_DRIVER_LOG=0)", std::memory_order_release);
    return;
  }
  if (!d.cuLogsRegisterCallback) {
    state.store("not given by this driver (it needs CUDA 12.9 or newer)", std::memory_order_release);
    return;
  }
  CUlogsCallbackHandle handle = nullptr;  // never unregistered: the ring lives as long as the process
  const bool ok = d.cuLogsRegisterCallback(&on_driver_log, nullptr, &handle) == CUDA_SUCCESS;
  registered.store(ok, std::memory_order_release);
  state.store(ok ? "registered (errors carry the driver's text)" : "cuLogsRegisterCallback failed",
              std::memory_order_release);
}

const char* driver_log_state() noexcept { return state.load(std::memory_order_acquire); }

std::string take_driver_log(const char* api) noexcept {
  if (!registered.load(std::memory_order_acquire)) return {};
  try {
    const pid_t self = ::gettid();
    const auto now = clock_type::now();
    const std::string_view name = api ? api : "";
    std::vector<const line*> mine;  // newest first
    std::size_t bytes = 0;
    ring& r = the_ring();
    std::string out;
    {
      std::lock_guard lock(r.m);
      for (auto it = r.lines.rbegin(); it != r.lines.rend(); ++it) {
        line& l = *it;
        if (l.taken || now - l.at > stale_after) continue;
        if (l.tid != self && l.named_tid != self) continue;
        if (!same_entry(l.entry, name)) continue;
        if (bytes + l.text.size() + 2 > driver_log::max_error_bytes && !mine.empty()) break;
        l.taken = true;
        bytes += l.text.size() + 2;
        mine.push_back(&l);
      }
      for (auto it = mine.rbegin(); it != mine.rend(); ++it) {
        if (!out.empty()) out += "; ";
        out += (*it)->text;
      }
    }
    if (!out.empty())
      logging::write_with(logging::level::info, [&] { return "driver log for " + std::string(name) + ": " + out; });
    return out;
  } catch (...) {
    return {};
  }
}

}  // namespace detail
}  // namespace cuasync
