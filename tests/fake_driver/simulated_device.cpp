// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The simulated driver's model: the device thread that runs queued work in order, the per-thread context stack,
// object lookups, call counting and failure injection.
#include "simulated_device.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

namespace sim {

namespace {

void read_injection(injection& inj) {
  const char* spec = std::getenv("FAKE_CUDA_FAIL");
  if (!spec || !*spec) return;
  std::string s = spec;
  const auto a = s.find(':');
  if (a == std::string::npos) return;
  inj.entry = s.substr(0, a);
  const auto b = s.find(':', a + 1);
  inj.nth = std::strtol(s.c_str() + a + 1, nullptr, 10);
  if (b != std::string::npos) inj.code = static_cast<int>(std::strtol(s.c_str() + b + 1, nullptr, 10));
}

// The next work that may run (its index in the queue), or none: the first item whose stream has no earlier work
// pending, whose event wait is satisfied and whose gate is open. Without a closed gate that is always the front,
// which keeps every stream's order and every event wait (a wait can only name work submitted before it).
std::size_t next_runnable(device_model& d) {
  std::vector<unsigned long long> held;  // streams with earlier work still queued
  for (std::size_t i = 0; i < d.queue.size(); ++i) {
    const device_model::work_item& item = d.queue[i];
    const bool skipped = item.ctx && item.ctx->sticky != CUDA_SUCCESS;  // does not run: nothing to wait for
    const bool runnable =
        skipped || ((!item.after || finished(d, item.after)) && (!item.ready || item.ready()));
    if (item.stream == 0) return i == 0 && runnable ? 0 : d.queue.size();  // a default stream orders with all work
    if (std::find(held.begin(), held.end(), item.stream) != held.end()) continue;
    if (runnable) return i;
    held.push_back(item.stream);
  }
  return d.queue.size();
}

// The device thread: runs queued work one item at a time (next_runnable's choice).
void device_thread(device_model* d) {
  std::unique_lock lock(d->m);
  for (;;) {
    d->work.wait(lock, [&] { return !d->queue.empty(); });
    const std::size_t next = next_runnable(*d);
    if (next == d->queue.size()) {
      d->work.wait_for(lock, std::chrono::milliseconds(1));  // a gate opens by a host write, not by a driver call
      continue;
    }
    device_model::work_item item = std::move(d->queue[next]);
    d->queue.erase(d->queue.begin() + static_cast<std::ptrdiff_t>(next));
    const std::uint64_t seq = item.seq;
    if (!item.ctx || item.ctx->sticky == CUDA_SUCCESS) {
      lock.unlock();
      item.fn();
      lock.lock();
    }
    if (seq == d->done + 1) {
      d->done = seq;
      while (!d->done_ahead.empty() && *d->done_ahead.begin() == d->done + 1) {
        d->done_ahead.erase(d->done_ahead.begin());
        ++d->done;
      }
    } else {
      d->done_ahead.insert(seq);
    }
    d->progress.notify_all();
  }
}

// Trivially destructible, as the driver's own per-thread stack outlives the thread's C++ objects: a runtime kept
// for the process (device_runtime::for_device) pushes its context while static objects are destroyed at exit.
constexpr int max_context_depth = 64;
thread_local context_state* context_stack[max_context_depth];
thread_local int context_depth = 0;

}  // namespace

device_model::device_model() {
  if (const char* n = std::getenv("FAKE_CUDA_DEVICES")) device_count = std::atoi(n);
  if (const char* m = std::getenv("FAKE_CUDA_DEVICE_MEMORY_MIB")) device_memory = std::size_t(std::atoll(m)) << 20;
  if (const char* cc = std::getenv("FAKE_CUDA_COMPUTE_CAPABILITY"); cc && std::atoi(cc) >= 10)
    compute_capability = std::atoi(cc);
  device_used.assign(static_cast<std::size_t>(device_count > 0 ? device_count : 0), 0);
  primary.assign(device_used.size(), nullptr);
  read_injection(inject);
}

device_model& model() {
  static device_model* d = [] {
    auto* m = new device_model;  // never destroyed (see the header)
    std::thread(device_thread, m).detach();
    return m;
  }();
  return *d;
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Never destroyed (a thread-local object would be, before the static destructors that still call the driver).
using thread_calls = std::map<std::string, long, std::less<>>;
thread_local thread_calls* calls_on_this_thread = nullptr;
thread_calls& this_threads_calls() {
  if (!calls_on_this_thread) {
    // Kept reachable from a global after the thread ends, so that a leak checker does not report them.
    static std::mutex m;
    static auto* every_thread = new std::vector<std::unique_ptr<thread_calls>>;
    std::lock_guard lock(m);
    calls_on_this_thread = every_thread->emplace_back(std::make_unique<thread_calls>()).get();
  }
  return *calls_on_this_thread;
}

long calls_here(const char* entry) {
  const thread_calls& calls = this_threads_calls();
  auto it = calls.find(std::string_view(entry));
  return it == calls.end() ? 0 : it->second;
}

CUresult enter(const char* entry, CUresult injected_default) {
  ++this_threads_calls()[entry];
  device_model& d = model();
  CUresult r = CUDA_SUCCESS;
  {
    std::lock_guard lock(d.m);
    const long n = ++d.calls[d.phase][entry];
    if (d.phase == 1 && !d.inject.fired && n == d.inject.nth && d.inject.entry == entry) {
      d.inject.fired = true;
      r = d.inject.code ? static_cast<CUresult>(d.inject.code) : injected_default;
    }
  }
  if (r != CUDA_SUCCESS) log_failure(entry, "injected failure (FAKE_CUDA_FAIL)");  // as a 12.9+ driver logs one
  return r;
}

void make_sticky(context_state* c, CUresult r) {
  if (c && c->sticky == CUDA_SUCCESS) c->sticky = r;
}

std::uint64_t submit(device_model& d, stream_state* s, std::function<void()> fn, std::uint64_t after,
                     std::function<bool()> ready, CUgraphNodeType type, node_params params) {
  if (s && s->capture) {  // captured, not run: `after` is none here (a wait in a capture is an edge, not work)
    capture_state& c = *s->capture;
    std::deque<graph_node>& nodes = c.into ? c.into->nodes : c.nodes;
    graph_node& n =
        nodes.emplace_back(graph_node{type, s->ctx, std::move(fn), std::move(ready), nullptr, {}, std::move(params)});
    capture_state::member& m = c.members[s->id];
    ++m.nodes;
    m.last = &n;
    return 0;
  }
  const std::uint64_t seq = ++d.submitted;
  d.queue.push_back({seq, s ? s->ctx : current_context(), std::move(fn), s ? s->id : 0, after, std::move(ready)});
  if (s) s->last = seq;
  d.work.notify_one();
  return seq;
}

bool finished(const device_model& d, std::uint64_t seq) { return seq <= d.done || d.done_ahead.count(seq); }

void wait_done(device_model& d, std::unique_lock<std::mutex>& lock, std::uint64_t seq) {
  d.progress.wait(lock, [&] { return finished(d, seq); });
}

void wait_all_done(device_model& d, std::unique_lock<std::mutex>& lock) {
  const std::uint64_t last = d.submitted;
  d.progress.wait(lock, [&] { return d.done >= last; });
}

context_state* current_context() { return context_depth ? context_stack[context_depth - 1] : nullptr; }
void set_current_context(context_state* c) {
  if (context_depth == 0) context_depth = 1;
  context_stack[context_depth - 1] = c;
}
void push_context(context_state* c) {
  if (context_depth < max_context_depth) context_stack[context_depth++] = c;
}
context_state* pop_context() { return context_depth ? context_stack[--context_depth] : nullptr; }

stream_state* find_stream(device_model& d, CUstream s, CUresult* r) {
  *r = CUDA_SUCCESS;
  const auto v = reinterpret_cast<std::uintptr_t>(s);
  if (v == 0 || v == 1) {  // the null and legacy default streams: an implicit dependency on blocking captures
    *r = legacy_stream_use(d, current_context());
    return nullptr;
  }
  if (v == 2) return nullptr;  // the per-thread default stream
  auto it = d.streams.find(s);
  if (it == d.streams.end()) {
    *r = CUDA_ERROR_INVALID_HANDLE;
    return nullptr;
  }
  context_state* c = it->second->ctx;
  if (!c->alive) *r = CUDA_ERROR_CONTEXT_IS_DESTROYED;
  else if (c->sticky != CUDA_SUCCESS) *r = c->sticky;
  else if (it->second->capture && it->second->capture->invalidated) *r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  return it->second.get();
}

allocation* find_memory(device_model& d, std::uintptr_t p, std::uintptr_t* base) {
  auto it = d.memory.upper_bound(p);
  if (it == d.memory.begin()) return nullptr;
  --it;
  if (p >= it->first + it->second.size) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

// ---- PTX: `.entry name(.param .u64 a, .param .align 8 .b8 b[16], ...)` ----

namespace {
// "u64" -> 8, "b8" -> 1
std::size_t scalar_size(const std::string& type) {
  if (type.size() < 2) return 0;
  const int bits = std::atoi(type.c_str() + 1);
  return bits >= 8 ? static_cast<std::size_t>(bits / 8) : 0;
}
}  // namespace

bool parse_ptx(const char* text, module_state& m) {
  const std::string ptx = text;
  std::size_t at = 0;
  bool any = false;
  while ((at = ptx.find(".entry", at)) != std::string::npos) {
    at += 6;
    std::size_t open = ptx.find('(', at);
    std::size_t brace = ptx.find('{', at);
    std::string name;
    for (std::size_t i = at; i < ptx.size() && i < std::min(open, brace); ++i)
      if (!std::isspace(static_cast<unsigned char>(ptx[i]))) name += ptx[i];
    auto f = std::make_unique<function_state>();
    f->module = &m;
    f->name = name;
    if (open != std::string::npos && open < brace) {
      const std::size_t close = ptx.find(')', open);
      std::string list = ptx.substr(open + 1, close - open - 1);
      std::size_t offset = 0, p = 0;
      while ((p = list.find(".param", p)) != std::string::npos) {
        p += 6;
        std::size_t end = list.find(',', p);
        std::string decl = list.substr(p, end == std::string::npos ? std::string::npos : end - p);
        std::size_t align = 0, size = 0;
        if (auto a = decl.find(".align"); a != std::string::npos) {
          align = static_cast<std::size_t>(std::atoi(decl.c_str() + a + 6));
          auto lb = decl.find('['), rb = decl.find(']');
          const auto t = decl.find(".b", a + 6);
          const std::size_t elem = t != std::string::npos ? scalar_size(decl.substr(t + 1, 3)) : 1;
          size = (lb != std::string::npos && rb != std::string::npos)
                     ? elem * static_cast<std::size_t>(std::atoi(decl.c_str() + lb + 1))
                     : elem;
        } else {
          auto t = decl.find('.');
          std::string type;
          for (std::size_t i = t + 1; i < decl.size() && std::isalnum(static_cast<unsigned char>(decl[i])); ++i)
            type += decl[i];
          size = align = scalar_size(type);
        }
        if (align == 0) align = 1;
        offset = (offset + align - 1) / align * align;
        f->params.push_back({offset, size});
        offset += size;
        if (end == std::string::npos) break;
        p = end;
      }
    }
    m.functions[name] = std::move(f);
    any = true;
  }
  return any;
}

}  // namespace sim
