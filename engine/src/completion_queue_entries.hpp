#pragma once
// Internal to the engine: the FIFOs' entries and what a pass collects, shared by the queues' bookkeeping
// (completion_queues.cpp: adding, detaching, finishing, failing groups) and their search (completion_passes.cpp).
#include <cuasync/engine/completion_queues.hpp>
#include <cuasync/engine/detail/block_cache.hpp>

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
};

using entry_cache = block_cache<sizeof(wait_entry)>;

inline wait_entry* new_entry(wait_target& t, queued_wait* w) {
  void* p = entry_cache::allocate();
  return new (p) wait_entry{t.source, t.token, t.group, t.order, std::move(t.keep_alive), w};
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
  std::deque<wait_entry*> entries;
  bool listed = false;
  // Every entry has a nonzero order and they are sorted: the newest being done means all are. Reset when empty.
  bool ordered = true;
  // The head was pending when last probed (and initially): the next search checks it first, so that a FIFO of long
  // waits costs two queries a pass however many are pending. Otherwise the search gallops back from the newest.
  bool head_pending = true;
};

// What one pass collects: completions, entries to release, groups that failed, queries made.
struct completion_queues::pass_state {
  std::vector<completed_wait>& done;
  std::vector<std::uintptr_t> done_groups;  // parallel to the entries this pass appended to `done`
  std::vector<wait_entry*> released;
  std::vector<std::pair<std::uintptr_t, std::error_code>> failed_groups;
  std::size_t first_done;
  std::uint64_t queries = 0;
  bool group_failed = false;
};

}  // namespace cuasync
