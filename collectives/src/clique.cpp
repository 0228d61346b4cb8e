#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>

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
  // Every member: a rank whose peer faulted waits in its kernel for data that never comes; the abort flag NCCL's
  // kernels poll lets them exit. Not on this thread: the poller (or an executor) called us.
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
thread_local std::vector<std::shared_ptr<clique>> grouped;
}

void note_grouped(const std::shared_ptr<clique>& c) {
  for (const auto& g : grouped)
    if (g == c) return;
  grouped.push_back(c);
}

std::vector<std::shared_ptr<clique>> take_grouped() { return std::exchange(grouped, {}); }

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
