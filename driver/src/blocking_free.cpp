// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The reaper: a thread of its own that makes the blocking frees of threads that must not block.
#include <cuasync/driver/blocking_free.hpp>
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/detail/context_life.hpp>
#include <cuasync/driver/detail/serial_worker.hpp>
#include <cuasync/trace/hooks.hpp>

#include <algorithm>
#include <compare>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

namespace cuasync {

namespace {
thread_local bool marked = false;
thread_local const std::function<bool()>* held_until = nullptr;  // the innermost deferred_until_scope's

bool deferred_everywhere() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("CUASYNC_DEFER_BLOCKING_FREES");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

detail::serial_worker& reaper() {
  static detail::serial_worker& w = detail::serial_worker::make("cuasync-reaper");
  return w;
}

// One life of a context (its handle is reused: a primary context released and retained again, a later context).
struct life_key {
  CUcontext ctx;
  unsigned long long life;
  auto operator<=>(const life_key&) const = default;
};

// Frees handed over and not yet settled (made or skipped), by the life they belong to; the lives whose teardown
// stopped waiting for them (their device never went idle within the bound).
struct ledger {
  std::mutex m;
  std::condition_variable settled;
  std::map<life_key, std::size_t> pending;
  std::set<life_key> abandoned;
  std::uint64_t skipped = 0, abandoned_total = 0;
};
ledger& the_ledger() {
  static ledger* l = new ledger;  // never destroyed: the reaper may still settle a free during exit
  return *l;
}

struct free_call {
  CUcontext ctx;
  const char* api;
  const void* handle;
  std::size_t bytes;
  CUresult (*release)(const detail::driver_entry_points&, const void*, std::size_t);
  void (*life_ended)(const void*, std::size_t) noexcept;
  void make() const noexcept {
    trace::host_call hooked(trace::category::alloc, api, bytes);
    detail::release_nothrow(ctx, api, handle,
                            [&](const detail::driver_entry_points& d) { return release(d, handle, bytes); });
  }
};

// Makes `f`, unless the life it was handed over in has ended (the context took its memory with it, and the address
// may be another allocation's by now) or it is `dropped`. Then settles it in the ledger. Only the driver's word that
// the context is gone ends a life: a failed id query alone once skipped a live context's free (a leaked pinned
// block, found by fault injection at cuCtxGetId).
void reap(const free_call& f, life_key key, bool dropped = false) noexcept {
  const bool ended = dropped || (key.life != 0 && detail::context_life_ended(key.ctx, key.life));
  if (!ended) f.make();
  else if (!dropped && f.life_ended) f.life_ended(f.handle, f.bytes);  // the context took a registration, not memory
  ledger& l = the_ledger();
  std::lock_guard lock(l.m);
  if (ended) ++l.skipped;
  if (auto it = l.pending.find(key); it != l.pending.end() && --it->second == 0) {
    l.pending.erase(it);
    l.abandoned.erase(key);  // its work ended after all
  }
  l.settled.notify_all();
}
// Holds a free until `ready` answers true, polling; false when process exit came first.
bool held_until_ready(const std::function<bool()>& ready) noexcept {
  using std::chrono::milliseconds;
  try {
    for (milliseconds pause{1}; !ready(); pause = std::min(pause * 2, milliseconds{20})) {
      if (reaper().stopping()) return false;
      std::this_thread::sleep_for(pause);
    }
  } catch (...) {
    // A predicate that throws holds nothing.
  }
  return true;
}
}  // namespace

deferred_until_scope::deferred_until_scope(std::function<bool()> ready) noexcept
    : ready_(std::move(ready)), outer_(std::exchange(held_until, &ready_)) {}
deferred_until_scope::~deferred_until_scope() { held_until = outer_; }

bool set_thread_must_not_block(bool must_not_block) noexcept { return std::exchange(marked, must_not_block); }
bool thread_must_not_block() noexcept { return marked || deferred_everywhere(); }
void drain_deferred_frees() noexcept { reaper().drain(); }

bool drain_deferred_frees_of(CUcontext ctx, std::chrono::milliseconds bound) noexcept {
  ledger& l = the_ledger();
  {
    std::lock_guard lock(l.m);
    if (l.pending.empty()) return true;  // the usual case: no driver call
  }
  if (reaper().on_worker()) return true;  // the frees ahead include the one this thread is making
  const life_key key{ctx, detail::context_life(ctx)};
  std::unique_lock lock(l.m);
  auto none = [&] { return !l.pending.contains(key); };
  if (l.abandoned.contains(key)) return none();  // waited for once already: the device is not going idle
  if (l.settled.wait_for(lock, bound, none)) return true;
  try {
    l.abandoned.insert(key);
    ++l.abandoned_total;
  } catch (...) {
  }
  return false;
}

deferred_free_stats deferred_frees() noexcept {
  deferred_free_stats s{reaper().posted(), reaper().ran()};
  ledger& l = the_ledger();
  std::lock_guard lock(l.m);
  s.skipped = l.skipped;
  s.abandoned = l.abandoned_total;
  return s;
}

namespace detail {
void release_blocking_nothrow(CUcontext ctx, unsigned long long life, const char* api, const void* handle,
                              std::size_t bytes,
                              CUresult (*release)(const driver_entry_points&, const void*, std::size_t),
                              void (*life_ended)(const void*, std::size_t) noexcept) noexcept {
  const free_call f{ctx, api, handle, bytes, release, life_ended};
  if (!thread_must_not_block()) {
    // A buffer that outlived its context's life (a primary context released fully, perhaps retained again with the
    // same handle): freeing it failed, and the failure was reported in the next life; or freed what that life had put
    // at the address.
    if (life != 0 && context_life_ended(ctx, life)) {
      if (life_ended) life_ended(handle, bytes);
      return;
    }
    return f.make();
  }
  // Unknown, the life is read here, while the owner still holds the context: the reaper compares it before the free.
  const life_key key{ctx, life != 0 ? life : context_life(ctx)};
  ledger& l = the_ledger();
  try {
    std::lock_guard lock(l.m);
    ++l.pending[key];
  } catch (...) {
    return f.make();  // no memory for the ledger
  }
  std::function<bool()> ready;
  try {
    if (held_until) ready = *held_until;
  } catch (...) {
  }
  auto task = [f, key, ready] { reap(f, key, ready && !held_until_ready(ready)); };
  // Not taken (no memory, or exit): made here, or dropped if it would wait for work cuasync knows is pending.
  if (!reaper().post(std::function<void()>(task))) reap(f, key, ready && !ready());
}
}  // namespace detail

}  // namespace cuasync
