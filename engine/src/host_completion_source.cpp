// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#include <cuasync/engine/host_completion_source.hpp>

namespace cuasync {

host_completion_source::~host_completion_source() = default;

std::uintptr_t host_completion_source::create() {
  std::lock_guard lock(mutex_);
  const std::uintptr_t t = next_++;
  tokens_.emplace(t, state{});
  ++live_;
  return t;
}

void host_completion_source::complete(std::uintptr_t token, std::error_code error, failure_scope scope) {
  std::lock_guard lock(mutex_);
  auto it = tokens_.find(token);
  if (it == tokens_.end() || it->second.result.status != poll_status::pending) return;
  it->second.result = error ? poll_result{poll_status::failed, error, scope} : poll_result{poll_status::ready, {}, {}};
}

std::size_t host_completion_source::queries(std::uintptr_t token) const {
  std::lock_guard lock(mutex_);
  auto it = tokens_.find(token);
  return it == tokens_.end() ? 0 : it->second.queries;
}

std::size_t host_completion_source::total_queries() const {
  std::lock_guard lock(mutex_);
  return total_queries_;
}

std::size_t host_completion_source::live_tokens() const {
  std::lock_guard lock(mutex_);
  return live_;
}

bool host_completion_source::live(std::uintptr_t token) const {
  std::lock_guard lock(mutex_);
  auto it = tokens_.find(token);
  return it != tokens_.end() && !it->second.released;
}

poll_result host_completion_source::query(std::uintptr_t token) noexcept {
  std::lock_guard lock(mutex_);
  ++total_queries_;
  auto it = tokens_.find(token);
  if (it == tokens_.end() || it->second.released)
    return {poll_status::failed, std::make_error_code(std::errc::invalid_argument), failure_scope::operation};
  ++it->second.queries;
  return it->second.result;
}

void host_completion_source::release(std::uintptr_t token) noexcept {
  std::lock_guard lock(mutex_);
  auto it = tokens_.find(token);
  if (it == tokens_.end() || it->second.released) return;
  --live_;
  if (!keep_history_) {
    tokens_.erase(it);
    return;
  }
  it->second.released = true;
}

}  // namespace cuasync
