#include <cuasync/collectives/detail/clique.hpp>
#include <cuasync/collectives/nccl_error.hpp>

#include <set>

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
    std::vector<nccl_comm> comms;
    for (const clique_member& m : members) comms.push_back(m.comm);
    aborter_ = std::thread([comms = std::move(comms)] {
      const nccl_entry_points& n = nccl();
      for (nccl_comm c : comms) n.comm_abort(c);
    });
  } catch (...) {
    // No thread to be had: abort here rather than leave ranks hanging.
    try {
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
  if (failed()) return true;
  const nccl_entry_points* n = nullptr;
  try {
    n = &nccl();
  } catch (...) {
    return false;  // no communicator exists without the library
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    nccl_result r = nccl_success;
    nccl_result q = n->comm_get_async_error(members[i].comm, &r);
    if (q != nccl_success) r = q;
    if (r != nccl_success && r != nccl_in_progress) {
      std::string what;
      try {
        what = "NCCL reported an asynchronous error on " + describe(static_cast<int>(i));
        if (n->get_last_error)
          if (const char* last = n->get_last_error(members[i].comm); last && *last) what += ": " + std::string(last);
      } catch (...) {
      }
      fail(make_nccl_error_code(r), std::move(what));
      return true;
    }
  }
  return false;
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
    for (clique_member& m : members)
      if (m.comm) n.comm_destroy(m.comm);  // waits for the communicator's work
  } catch (...) {
  }
}

const char* operation_label(const char* op, const clique& c, int index) {
  static std::mutex mutex;
  static std::set<std::string> labels;  // never freed: the names live as long as the exceptions that carry them
  std::string label = std::string(op) + " on " + c.describe(index);
  std::lock_guard lock(mutex);
  return labels.insert(std::move(label)).first->c_str();
}

}  // namespace cuasync::collectives::detail
