// The per-thread slots behind calls_in_flight(), and naming a call's frames for a report.
#include <cuasync/trace/blocking_calls.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>

#include "watch_slots.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

namespace cuasync::trace {
namespace {

struct slot {
  std::mutex mutex;
  std::uint64_t thread = 0;
  std::string thread_name;
  detail::watch_entry entry;
};

struct slots {
  std::mutex mutex;
  std::vector<std::shared_ptr<slot>> all;
};
slots& the_slots() {
  static slots* s = new slots;  // never destroyed: threads may publish during the process's exit
  return *s;
}

thread_local std::shared_ptr<slot> this_thread_slot;

slot& my_slot() {
  if (!this_thread_slot) {
    auto s = std::make_shared<slot>();
    s->thread = this_thread_lane().id;
    char name[16] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof name) == 0) s->thread_name = name;
    slots& registry = the_slots();
    std::lock_guard lock(registry.mutex);
    registry.all.push_back(s);
    this_thread_slot = std::move(s);
  }
  return *this_thread_slot;
}

call_in_flight view_of(const slot& s) {
  call_in_flight c;
  c.thread = s.thread;
  c.thread_name = s.thread_name;
  c.call = s.entry.call;
  c.since_ns = s.entry.since_ns;
  c.where = s.entry.where;
  c.frames = s.entry.frames;
  return c;
}

std::string demangled(const char* symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(symbol, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(symbol);
}

// cuasync's, the standard library's and Asio's frames say nothing about which of the user's code called.
bool is_library_frame(const std::string& name) {
  for (const char* prefix : {"cuasync::", "std::", "boost::", "void cuasync::", "void std::", "void boost::"})
    if (name.rfind(prefix, 0) == 0) return true;
  return name.find("cuasync::trace::") != std::string::npos;
}

}  // namespace

namespace detail {

bool publish_call(const char* call, const std::source_location* where, watch_entry& previous) noexcept {
  try {
    slot& s = my_slot();
    watch_entry next;
    next.call = call;
    next.where = where ? *where : std::source_location{};
    void* frames[16];
    const int n = backtrace(frames, 16);
    next.frames.assign(frames + (n > 2 ? 2 : 0), frames + n);  // past publish_call and start_host_call
    next.since_ns = now_ns();
    std::lock_guard lock(s.mutex);
    previous = std::move(s.entry);
    s.entry = std::move(next);
    return true;
  } catch (...) {
    return false;
  }
}

void restore_call(watch_entry previous) noexcept {
  slot& s = *this_thread_slot;  // published before, so the slot exists
  std::lock_guard lock(s.mutex);
  s.entry = std::move(previous);
}

}  // namespace detail

std::vector<call_in_flight> calls_in_flight() {
  std::vector<std::shared_ptr<slot>> all;
  {
    slots& registry = the_slots();
    std::lock_guard lock(registry.mutex);
    all = registry.all;
  }
  std::vector<call_in_flight> out;
  for (const auto& s : all) {
    std::lock_guard lock(s->mutex);
    if (s->entry.call) out.push_back(view_of(*s));
  }
  return out;
}

bool call_of_thread(std::uint64_t thread, call_in_flight& out) {
  std::vector<std::shared_ptr<slot>> all;
  {
    slots& registry = the_slots();
    std::lock_guard lock(registry.mutex);
    all = registry.all;
  }
  for (const auto& s : all) {
    std::lock_guard lock(s->mutex);
    if (s->thread == thread && s->entry.call) {
      out = view_of(*s);
      return true;
    }
  }
  return false;
}

std::uint64_t this_thread_ordinal() noexcept { return this_thread_lane().id; }

std::vector<std::string> describe_frames(const std::vector<void*>& frames, std::size_t max) {
  std::vector<std::string> out;
  for (void* frame : frames) {
    if (out.size() >= max) break;
    Dl_info info{};
    std::string name;
    if (dladdr(frame, &info) && info.dli_sname) name = demangled(info.dli_sname);
    if (!name.empty() && is_library_frame(name)) continue;
    char where[64] = "?";
    if (info.dli_fbase)
      std::snprintf(where, sizeof where, "+0x%llx",
                    static_cast<unsigned long long>(static_cast<char*>(frame) - static_cast<char*>(info.dli_fbase)));
    const std::string module = info.dli_fname ? info.dli_fname : "?";
    out.push_back((name.empty() ? std::string("?") : name) + " at " + module + where);
  }
  return out;
}

}  // namespace cuasync::trace
