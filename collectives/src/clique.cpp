// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <condition_variable>
#include <deque>
#include <set>
#include <utility>

namespace cuasync::collectives::detail {

void clique::fail(std::error_code ec, std::string what) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    error_ = ec;
    try {
      detail_ = std::move(what);
    } catch (...) {
    }
    failed_.store(true, std::memory_order_release);
  }
  // This thread's NCCL group still holds queued calls on the communicators (an enqueue refused inside a group, or
  // the application's abort there): ncclGroupEnd would use them after ncclCommAbort freed them. The group's end
  // aborts once NCCL has let go of them (and, holding the domain, it would wait for the aborter forever).
  if (held_by_this_group(*this)) {
    abort_deferred_ = true;
    return;
  }
  start_abort();
}

void clique::start_deferred_abort() noexcept {
  if (!std::exchange(abort_deferred_, false)) return;
  start_abort();
}

void clique::start_abort() noexcept {
  // Every member: a rank whose peer faulted waits in its kernel for data that never comes; the abort flag NCCL's
  // kernels poll lets them exit. Not on this thread: the poller (or an executor) called us. The exclusive lock
  // waits for calls into NCCL in flight on other threads, and for their open groups that hold the domain.
  try {
    aborter_ = std::thread([this] {
      std::unique_lock lock(comms_mutex_);
      const nccl_entry_points& n = nccl();
      for (const clique_member& m : members) n.comm_abort(m.comm);
    });
  } catch (...) {
    // No thread to be had: abort here rather than leave ranks hanging.
    try {
      std::unique_lock lock(comms_mutex_);
      const nccl_entry_points& n = nccl();
      for (const clique_member& m : members) n.comm_abort(m.comm);
    } catch (...) {
    }
  }
}

std::error_code clique::error() const noexcept {
  std::lock_guard lock(mutex_);
  return error_;
}

std::string clique::detail() const {
  std::lock_guard lock(mutex_);
  return detail_;
}

bool clique::poll_async_errors() noexcept {
  const nccl_entry_points* n = nullptr;
  try {
    n = &nccl();
  } catch (...) {
    return false;  // no communicator exists without the library
  }
  nccl_result found = nccl_success;
  std::string what;
  {
    std::shared_lock lock(comms_mutex_, std::try_to_lock);
    if (!lock.owns_lock() || failed()) return failed();  // being aborted: the fault is known
    for (std::size_t i = 0; i < members.size() && found == nccl_success; ++i) {
      nccl_result r = nccl_success;
      if (nccl_result q = n->comm_get_async_error(members[i].comm, &r); q != nccl_success) r = q;
      if (r == nccl_success || r == nccl_in_progress) continue;
      found = r;
      try {
        what = "NCCL reported an asynchronous error on " + describe(static_cast<int>(i));
        if (n->get_last_error)
          if (const char* last = n->get_last_error(members[i].comm); last && *last) what += ": " + std::string(last);
      } catch (...) {
      }
    }
  }
  if (found == nccl_success) return false;
  fail(make_nccl_error_code(found), std::move(what));  // outside the lock: the abort takes it exclusively
  return true;
}

std::string clique::describe(int index) const {
  const clique_member& m = members.at(static_cast<std::size_t>(index));
  return "rank " + std::to_string(m.rank) + " of " + std::to_string(nranks) + " on device " + std::to_string(m.device);
}

clique::~clique() {
  if (aborter_.joinable()) {
    aborter_.join();  // aborted communicators are freed by ncclCommAbort
    return;
  }
  if (abort_deferred_) {  // the group that deferred it never ended (its thread's group state is gone with it)
    abort_deferred_ = false;
    try {
      const nccl_entry_points& n = nccl();
      for (const clique_member& m : members) n.comm_abort(m.comm);
    } catch (...) {
    }
    return;
  }
  if (failed()) return;
  try {
    const nccl_entry_points& n = nccl();
    // Several ranks of one thread finalize together (NCCL's rule for ncclCommFinalize on several communicators of
    // one thread: in a group), then each is destroyed; both wait for the communicators' work.
    if (n.comm_finalize && members.size() > 1) {
      n.group_start();
      for (clique_member& m : members)
        if (m.comm) n.comm_finalize(m.comm);
      n.group_end();
    }
    for (clique_member& m : members)
      if (m.comm) n.comm_destroy(m.comm);
  } catch (...) {
  }
}

namespace {

// The domains with calls in this thread's open groups, each held (hold_comms) until the outermost group ends:
// NCCL keeps the calls until then.
thread_local std::vector<std::shared_ptr<clique>> grouped;
thread_local std::vector<std::shared_lock<std::shared_mutex>> grouped_holds;

// Fault domains whose last reference was dropped where their teardown must not run, destroyed one after another
// on a thread of their own. At exit it finishes what it was given; after that, teardown is done where it is dropped.
constinit std::atomic<bool> disposer_gone{false};
thread_local bool no_teardown_here = false;

class disposer {
 public:
  ~disposer() {
    disposer_gone.store(true);  // first: later drops tear down where they are
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // False when it cannot take `c` (no thread to be had): the caller destroys it.
  bool take(clique* c) noexcept {
    try {
      std::lock_guard lock(mutex_);
      if (stopping_) return false;
      if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
      queue_.push_back(c);
    } catch (...) {
      return false;
    }
    wake_.notify_one();
    return true;
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      clique* c = queue_.front();
      queue_.pop_front();
      lock.unlock();
      delete c;
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<clique*> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

struct clique_deleter {
  void operator()(clique* c) const noexcept {
    if (no_teardown_here && !disposer_gone.load()) {
      static disposer d;  // made on first use: destroyed at exit before the driver and the loaded NCCL it needs
      if (d.take(c)) return;
    }
    delete c;
  }
};

}  // namespace

std::shared_ptr<clique> make_clique() { return std::shared_ptr<clique>(new clique, clique_deleter{}); }

teardown_elsewhere::teardown_elsewhere() noexcept : saved_(std::exchange(no_teardown_here, true)) {}
teardown_elsewhere::~teardown_elsewhere() { no_teardown_here = saved_; }

void note_grouped(const std::shared_ptr<clique>& c) {
  if (held_by_this_group(*c)) return;
  grouped.reserve(grouped.size() + 1);  // no throw between taking the hold and keeping it
  grouped_holds.reserve(grouped_holds.size() + 1);
  grouped_holds.push_back(c->hold_comms());
  grouped.push_back(c);
}

bool held_by_this_group(const clique& c) noexcept {
  for (const auto& g : grouped)
    if (g.get() == &c) return true;
  return false;
}

std::vector<std::shared_ptr<clique>> take_grouped() noexcept {
  grouped_holds.clear();  // first: an abort may proceed once NCCL has let go of the communicators
  return std::exchange(grouped, {});
}

namespace {
const char* intern(std::string label) {
  static std::mutex mutex;
  static std::set<std::string> labels;  // never freed: the names live as long as the exceptions that carry them
  std::lock_guard lock(mutex);
  return labels.insert(std::move(label)).first->c_str();
}
}  // namespace

const char* operation_label(const char* op, const clique& c, int index) {
  return intern(std::string(op) + " on " + c.describe(index));
}

const char* parts_label(std::span<const rank_part> parts) {
  std::string label = "collective on ";
  for (std::size_t i = 0; i < parts.size(); ++i) label += (i ? " + " : "") + parts[i].comm.describe();
  return intern(std::move(label));
}

}  // namespace cuasync::collectives::detail
