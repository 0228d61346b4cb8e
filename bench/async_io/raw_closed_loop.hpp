// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Hand-written raw-driver closed loops, the ceiling for "awaited operations per second": `slots` operations in
// flight over `streams`, one thread, each slot relaunched (empty kernel) as soon as its completion is seen.
//   by_event_query: launch + cuEventRecord, completion by cuEventQuery on each in-flight slot in turn (what a
//                   framework writes by hand; a query of finished work costs ~1.3 µs on the H200, pending ~0.1 µs);
//   by_host_word:   launch + cuStreamWriteValue64 of a sequence number into mapped pinned memory, completion by
//                   reading that word (no driver call to see completion, but the write costs ~0.7 µs to enqueue).
#include "bench.hpp"
#include "gpu.hpp"

#include <vector>

namespace cuasync::bench {

struct closed_loop {
  int ops = 64'000, slots = 64;
  kernel_ref kernel;  // launched with one thread and no arguments

  double by_event_query(const std::vector<stream>& ss, event_options options = {}) const {
    const int n = static_cast<int>(ss.size());
    std::vector<event> es;
    for (int i = 0; i < slots; ++i) es.push_back(event::create(ss.front().context(), options));
    auto submit = [&](int i) {
      launch(ss[i % n], kernel, {.grid = 1, .block = 1});
      es[i].record(ss[i % n]);
    };
    const auto t0 = clock::now();
    for (int i = 0; i < slots; ++i) submit(i);
    for (long long done = 0; done < ops;)
      for (int i = 0; i < slots && done < ops; ++i)
        if (es[i].query()) {  // throws on an error (a loop that ignored it would spin forever)
          ++done;
          submit(i);
        }
    const double r = ops / (us_since(t0) * 1e-6);
    for (auto& s : ss) s.synchronize();
    return r;
  }

  double by_host_word(const std::vector<stream>& ss) const {
    const int n = static_cast<int>(ss.size());
    pinned_buffer words = pinned_buffer::allocate(ss.front().context(), slots * sizeof(std::uint64_t));
    auto* host = words.data<volatile std::uint64_t>();
    for (int i = 0; i < slots; ++i) host[i] = 0;
    const CUdeviceptr dev = words.device_pointer();
    std::vector<std::uint64_t> want(slots, 0);
    std::uint64_t seq = 0;
    auto submit = [&](int i) {
      launch(ss[i % n], kernel, {.grid = 1, .block = 1});
      want[i] = ++seq;
      if (CUresult r = detail::driver().cuStreamWriteValue64(ss[i % n].get(), dev + 8 * i, want[i], 0);
          r != CUDA_SUCCESS)
        detail::throw_cu(r, "cuStreamWriteValue64", ss[i % n].describe(), std::source_location::current());
    };
    const auto t0 = clock::now();
    for (int i = 0; i < slots; ++i) submit(i);
    for (long long done = 0; done < ops;)
      for (int i = 0; i < slots && done < ops; ++i)
        if (host[i] >= want[i]) {
          ++done;
          submit(i);
        }
    const double r = ops / (us_since(t0) * 1e-6);
    for (auto& s : ss) s.synchronize();
    return r;
  }
};

}  // namespace cuasync::bench
