// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Internal to the engine: the FIFOs' entries and what a pass collects, shared by the queues' bookkeeping
// (completion_queues.cpp: adding, detaching, finishing, failing groups) and their search (completion_passes.cpp).
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/detail/block_cache.hpp>
#include <cuasync/engine/detail/ring_queue.hpp>

#include <deque>
#include <memory>
#include <utility>
#include <vector>

namespace cuasync {
namespace detail {

// A token in a FIFO. Owned by the FIFO until the source says it is done; `wait` is null once the wait was handed
// back (completed or detached).
struct wait_entry {
  completion_source* source = nullptr;
  std::uintptr_t token = 0;
  std::uintptr_t group = 0;
  std::uint64_t order = 0;  // wait_target::order
  std::shared_ptr<void> keep_alive;
  queued_wait* wait = nullptr;
  std::uint64_t work_key = 0;  // duration_predictor::key_of(target's key, group); 0: not predicted
  long long issue_ns = 0;
  long long predicted_ns = 0;  // looked up at add; 0: unknown
  long long pending_ns = 0;    // the last pass that found it pending (passes only)
};

using entry_cache = block_cache<sizeof(wait_entry)>;

inline wait_entry* new_entry(wait_target& t, queued_wait* w) {
  void* p = entry_cache::allocate();
  return new (p) wait_entry{t.source, t.token, t.group, t.order, std::move(t.keep_alive), w,
                            duration_predictor::key_of(t.work_key, t.group), t.issue_ns};
}
inline void delete_entry(wait_entry* e) noexcept {
  e->~wait_entry();
  entry_cache::free(e);
}
}  // namespace detail

using detail::wait_entry;

struct completion_queues::fifo {
  completion_source* source = nullptr;
  std::uintptr_t group = 0;
  detail::ring_queue<wait_entry*> entries;  // no allocation once it has grown (std::deque allocates as it cycles)
  bool listed = false;
  // Every entry has a nonzero order and they are sorted: the newest being done means all are. Reset when empty.
  bool ordered = true;
  // The head was pending when last probed (and initially): the next search checks it first, so that a FIFO of long
  // waits costs two queries a pass however many are pending. Otherwise the search gallops back from the newest.
  bool head_pending = true;
  // When this FIFO's last entry was seen done: the next one's start is the later of that and its issue time.
  long long last_done_ns = 0;
};

namespace detail {
// The vectors a pass fills, reused per thread so that a pass allocates nothing once they have grown.
struct pass_vectors {
  std::vector<std::uintptr_t> done_groups;
  std::vector<wait_entry*> released;
  std::vector<std::pair<std::uintptr_t, std::error_code>> failed_groups;
  std::vector<std::uintptr_t> tokens;
  void clear() noexcept {
    done_groups.clear();
    released.clear();
    failed_groups.clear();
    tokens.clear();
  }
};

// Takes the thread's pass_vectors out of its slot for one pass (a nested pass on the same thread, from a release,
// finds the slot empty and grows its own) and puts them back cleared, the larger kept. Per thread, not members of
// the queues: a pass's last step (releasing tokens) runs outside the pass lock, so two passes can use them at once.
class pass_vectors_lease {
 public:
  pass_vectors_lease() noexcept : v_(std::move(slot())) {}
  ~pass_vectors_lease() {
    v_.clear();
    pass_vectors& kept = slot();
    if (v_.released.capacity() >= kept.released.capacity()) kept = std::move(v_);
  }
  pass_vectors_lease(const pass_vectors_lease&) = delete;
  pass_vectors_lease& operator=(const pass_vectors_lease&) = delete;
  pass_vectors& get() noexcept { return v_; }

 private:
  static pass_vectors& slot() noexcept {
    thread_local pass_vectors v;
    return v;
  }
  pass_vectors v_;
};
}  // namespace detail

// What one pass collects: completions, entries to release, groups that failed, queries made.
struct completion_queues::pass_state {
  std::vector<completed_wait>& done;
  std::vector<std::uintptr_t>& done_groups;  // parallel to the entries this pass appended to `done`
  std::vector<wait_entry*>& released;
  std::vector<std::pair<std::uintptr_t, std::error_code>>& failed_groups;
  std::size_t first_done;
  long long now = 0;  // when the pass began: probes found pending are pending at least until then
  std::uint64_t queries = 0;
  bool group_failed = false;
};

}  // namespace cuasync
