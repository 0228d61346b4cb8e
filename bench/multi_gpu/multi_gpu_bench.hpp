// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Shared by the parts of bench/multi_gpu: two devices' runtimes and streams, and the timing of a batch.
#include "bench.hpp"

#include <cuasync/collectives/communicator.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <memory>
#include <vector>

namespace cuasync::bench::multi_gpu {

struct device_side {
  std::shared_ptr<runtime::device_runtime> rt;
  stream s;        // cuasync's stream
  stream raw;      // the baseline's stream (a plain CUstream; only raw calls go on it)
};

inline device_side side_of(int ordinal) {
  auto rt = runtime::device_runtime::for_device(ordinal);
  stream s = stream::create(rt->context()), raw = stream::create(rt->context());
  return {rt, std::move(s), std::move(raw)};
}

inline double gbps(double bytes, double us) { return us > 0 ? bytes / (us * 1e3) : 0; }

//! Peer copies: one and both directions at 4 MiB, 64 MiB, 1 GiB, against raw cuMemcpyPeerAsync. Notes the cost of
//! enabling peer access.
void peer_copy_bench(report& rep, device_side& d0, device_side& d1);

//! All-reduce bus bandwidth (1 MiB to 1 GiB) and awaited 4-byte latency, with `comms` (all ranks, or this process's
//! one) against raw NCCL calls on raw streams. `tag` names the mode in the rows.
void all_reduce_bench(report& rep, std::vector<collectives::communicator>& comms, std::vector<device_side*> sides,
                      const std::string& tag, bool quick);

}  // namespace cuasync::bench::multi_gpu
