// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Per-thread labels (a stack of entries, each with its joined text so current_label() is a lookup) and host scopes.
#include <cuasync/trace/scope.hpp>

#include <algorithm>
#include <vector>

namespace cuasync::trace {
namespace {

struct label_entry {
  const label* owner;
  std::string text;    // this label's own text
  std::string joined;  // the texts from the outermost label to this one, joined with " / "
};

struct label_stack {
  std::vector<label_entry> entries;
  const std::string empty;

  // Rebuilds the joined texts from entry `from` on (after a label in the middle went away).
  void rejoin(std::size_t from) {
    for (std::size_t i = from; i < entries.size(); ++i)
      entries[i].joined = i == 0 ? entries[i].text : entries[i - 1].joined + " / " + entries[i].text;
  }
};
thread_local label_stack labels;

}  // namespace

const std::string& current_label() noexcept {
  return labels.entries.empty() ? labels.empty : labels.entries.back().joined;
}

label::label(std::string text) {
  labels.entries.push_back({this, std::move(text), {}});
  labels.rejoin(labels.entries.size() - 1);
}

label::~label() {
  auto& entries = labels.entries;
  // Usually the last entry; a label destroyed out of order (coroutine frames) is found and removed where it is.
  const auto it = std::find_if(entries.rbegin(), entries.rend(), [&](const label_entry& e) { return e.owner == this; });
  if (it == entries.rend()) return;
  const auto index = static_cast<std::size_t>(std::distance(entries.begin(), it.base()) - 1);
  entries.erase(entries.begin() + static_cast<std::ptrdiff_t>(index));
  try {
    labels.rejoin(index);
  } catch (...) {
    // Out of memory while shortening strings: the later entries keep their old joined text.
  }
}

void scope::start(trace::category c, std::string_view name, std::uint64_t bytes) noexcept {
  try {
    auto s = std::make_unique<span>();
    s->lane = this_thread_lane();
    s->category = c;
    s->bytes = bytes;
    s->name.assign(name);
    s->label = current_label();
    s->begin_ns = now_ns();
    open_ = std::move(s);
  } catch (...) {
    // Not recorded: a scope never throws for the trace's sake.
  }
}

void scope::finish() noexcept {
  open_->end_ns = now_ns();
  record(std::move(*open_));
  open_.reset();
}

}  // namespace cuasync::trace
