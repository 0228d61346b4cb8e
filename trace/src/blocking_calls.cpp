// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The per-thread slots behind calls_in_flight(), and naming a call's frames for a report.
#include <cuasync/trace/blocking_calls.hpp>

#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/recorder.hpp>

#include "watch_slots.hpp"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>

namespace cuasync::trace {
namespace {

struct slot {
  std::mutex mutex;
  std::uint64_t thread = 0;
  long os_id = 0;  // the kernel's thread id, for the probes (thread_probe.hpp)
  std::string thread_name;
  detail::watch_entry entry;
};

// Weak: a thread's slot goes with the thread (its thread_local owner), so threads that come and go leave nothing.
struct slots {
  std::mutex mutex;
  std::vector<std::weak_ptr<slot>> all;
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
    s->os_id = ::syscall(SYS_gettid);
    char name[16] = {};
    if (pthread_getname_np(pthread_self(), name, sizeof name) == 0) s->thread_name = name;
    slots& registry = the_slots();
    std::lock_guard lock(registry.mutex);
    std::erase_if(registry.all, [](const std::weak_ptr<slot>& w) { return w.expired(); });
    registry.all.push_back(s);
    this_thread_slot = std::move(s);
  }
  return *this_thread_slot;
}

// The slots of the threads alive now.
std::vector<std::shared_ptr<slot>> live_slots() {
  slots& registry = the_slots();
  std::lock_guard lock(registry.mutex);
  std::vector<std::shared_ptr<slot>> live;
  for (const auto& w : registry.all)
    if (auto s = w.lock()) live.push_back(std::move(s));
  return live;
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

// cuasync's, the standard library's and Boost's own functions say nothing about which of the user's code called: judged
// by the mangled name, whose first component is the namespace whatever the return type (a lambda inside such a
// function, `_ZZ...`, by its enclosing function).
bool is_library_symbol(std::string_view mangled) {
  if (mangled.starts_with("_ZZ"))
    mangled.remove_prefix(3);
  else if (mangled.starts_with("_Z"))
    mangled.remove_prefix(2);
  else
    return false;
  if (mangled.starts_with("St")) return true;  // std::f
  if (!mangled.starts_with("N")) return false;
  mangled.remove_prefix(1);
  while (!mangled.empty() && std::string_view("KVRO").find(mangled.front()) != std::string_view::npos)
    mangled.remove_prefix(1);  // the qualifiers of a member function
  for (std::string_view ns : {"St", "7cuasync", "5boost", "9__gnu_cxx"})
    if (mangled.starts_with(ns)) return true;
  return false;
}

// The C library, the C++ runtime, the loader, the driver and the sanitizers' runtimes.
bool is_system_module(std::string_view path) {
  const std::string_view file = path.substr(path.rfind('/') + 1);
  for (std::string_view prefix : {"libc.so", "libc-", "libstdc++", "libgcc_s", "ld-linux", "libpthread", "libcuda",
                                  "libnvrtc", "libtsan", "libasan", "libubsan"})
    if (file.starts_with(prefix)) return true;
  return false;
}

}  // namespace

namespace detail {

std::string demangled(const char* symbol) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(symbol, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(symbol);
}

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

bool register_thread() noexcept {
  try {
    my_slot();
    return true;
  } catch (...) {
    return false;
  }
}

long os_thread_of(std::uint64_t thread) noexcept {
  try {
    for (const auto& s : live_slots())
      if (s->thread == thread) return s->os_id;
  } catch (...) {
  }
  return 0;
}

void restore_call(watch_entry previous) noexcept {
  slot& s = *this_thread_slot;  // published before, so the slot exists
  std::lock_guard lock(s.mutex);
  s.entry = std::move(previous);
}

}  // namespace detail

std::vector<call_in_flight> calls_in_flight() {
  std::vector<call_in_flight> out;
  for (const auto& s : live_slots()) {
    std::lock_guard lock(s->mutex);
    if (s->entry.call) out.push_back(view_of(*s));
  }
  return out;
}

bool call_of_thread(std::uint64_t thread, call_in_flight& out) {
  for (const auto& s : live_slots()) {
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
  // Frames without a name (local symbols: a lambda, a template on a lambda's type, a static function) are shown only
  // when no frame has one, as module+offset for addr2line: beside a named frame they are noise.
  std::vector<std::string> named, unnamed;
  for (void* frame : frames) {
    if (named.size() >= max) break;
    Dl_info info{};
    if (!dladdr(frame, &info)) info = Dl_info{};
    if (info.dli_sname && is_library_symbol(info.dli_sname)) continue;
    const std::string module = info.dli_fname ? info.dli_fname : "?";
    if (is_system_module(module)) continue;
    char offset[32] = "";
    if (info.dli_fbase)
      std::snprintf(offset, sizeof offset, "+0x%llx",
                    static_cast<unsigned long long>(static_cast<char*>(frame) - static_cast<char*>(info.dli_fbase)));
    if (info.dli_sname)
      named.push_back(detail::demangled(info.dli_sname) + " at " + module + offset);
    else if (unnamed.size() < max)
      unnamed.push_back("? at " + module + offset);
  }
  return named.empty() ? unnamed : named;
}

}  // namespace cuasync::trace
