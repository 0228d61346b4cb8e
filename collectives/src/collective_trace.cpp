// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Collectives on the timeline (collective_trace.hpp).
#include "collective_trace.hpp"

#include <utility>
#include <vector>

namespace cuasync::collectives::detail {

namespace {

// A stream's calls in the open group: one GPU span from the first call's begin event to the group's end.
struct grouped_span {
  CUstream stream = nullptr;
  std::unique_ptr<cuasync::detail::instrumented_op> op;
  std::string apis;  // "ncclSend + ncclRecv"
  std::uint64_t bytes = 0;
  std::string who;
};

thread_local std::vector<grouped_span> grouped_spans;

std::string span_name(const std::string& apis, const std::string& who) { return apis + " (" + who + ")"; }

}  // namespace

void traced_collective::start(std::uint32_t hooks, const communicator& c, stream_ref s, const char* nccl_api,
                              std::uint64_t bytes) noexcept {
  try {
    stream_ = s;
    api_ = nccl_api;
    bytes_ = bytes;
    who_ = c.describe();
    op_ = std::make_unique<cuasync::detail::instrumented_op>(
        hooks, s,
        cuasync::detail::gpu_op{.category = trace::category::collective, .call = nccl_api,
                                .name = span_name(nccl_api, who_), .bytes = bytes});
  } catch (...) {
    op_.reset();  // untraced: the call goes ahead
  }
}

void traced_collective::finish(bool in_group) noexcept {
  if (!in_group) {
    op_->enqueued();
    op_.reset();
    return;
  }
  op_->issued();
  try {
    for (grouped_span& g : grouped_spans)
      if (g.stream == stream_.get()) {
        g.apis += std::string(" + ") + api_;
        g.bytes += bytes_;
        op_.reset();  // its begin event is not needed: the stream's first call in the group has one
        return;
      }
    grouped_spans.push_back({stream_.get(), std::move(op_), api_, bytes_, std::move(who_)});
  } catch (...) {
    op_.reset();
  }
}

traced_collective::~traced_collective() = default;

void end_grouped_traces(bool launched) noexcept {
  std::vector<grouped_span> spans = std::exchange(grouped_spans, {});
  if (!launched) return;
  for (grouped_span& g : spans) {
    try {
      g.op->rename(span_name(g.apis, g.who), g.bytes);
    } catch (...) {
    }
    g.op->enqueued();
  }
}

}  // namespace cuasync::collectives::detail
