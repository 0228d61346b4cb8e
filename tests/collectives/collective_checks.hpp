// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// Every collective, run on the ranks this process drives (all of them, or one), awaited, and compared with a CPU
// reference computed from every rank's inputs (which each process can compute: input(r, i) is a formula).
#include <cuasync/collectives/async_collectives.hpp>
#include <cuasync/runtime/copy.hpp>
#include <cuasync/runtime/device_runtime.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "child_process.hpp"

#include <unistd.h>

#include <cstdio>
#include <future>
#include <functional>
#include <string>
#include <vector>

namespace cuasync::test {

// Integer-valued floats: sums are exact in any order.
inline float input(int rank, std::size_t i) { return static_cast<float>((rank + 1) * 1000 + static_cast<int>(i % 977)); }

struct local_rank {
  const collectives::communicator* comm;
  std::shared_ptr<runtime::device_runtime> rt;
  stream s;
};

inline std::vector<local_rank> local_ranks(const std::vector<collectives::communicator>& comms) {
  std::vector<local_rank> out;
  for (const auto& c : comms) {
    auto rt = runtime::device_runtime::for_device(c.device());
    stream s = stream::create(rt->context());
    out.push_back({&c, rt, std::move(s)});
  }
  return out;
}

// Runs `issue(rank)` for every local rank in one NCCL group, then awaits all their streams at once from a coroutine.
inline void grouped(std::vector<local_rank>& ranks, const std::function<void(local_rank&)>& issue) {
  {
    collectives::group g;
    for (auto& r : ranks) issue(r);
    g.end();
  }
  boost::asio::io_context io;
  auto done = boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        std::vector<collectives::rank_part> parts;
        for (auto& r : ranks) parts.push_back({*r.comm, r.s});
        co_await collectives::async_wait_collectives(parts);  // one wait for every local rank
      },
      boost::asio::use_future);
  io.run();
  done.get();
}

inline std::vector<float> to_host(local_rank& r, runtime::tracked_buffer& b) {
  std::vector<float> out(b.size() / sizeof(float));
  runtime::copy_async(*r.rt, r.s, std::as_writable_bytes(std::span<float>(out)), b);
  r.s.synchronize();
  return out;
}

inline runtime::tracked_buffer from_formula(local_rank& r, std::size_t count, int rank) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) v[i] = input(rank, i);
  auto b = runtime::tracked_buffer::allocate(*r.rt, r.s, count * sizeof(float));
  runtime::copy_async(*r.rt, r.s, b, std::as_bytes(std::span<const float>(v)));
  r.s.synchronize();
  return b;
}

// Checks each collective on the local ranks; returns the failures (empty: all matched). `count` divisible by nranks.
inline std::vector<std::string> check_every_collective(std::vector<local_rank>& ranks, std::size_t count) {
  using namespace collectives;
  std::vector<std::string> failures;
  const int n = ranks.front().comm->size();
  const std::size_t part = count / static_cast<std::size_t>(n);
  auto expect = [&](const char* what, const local_rank& r, const std::vector<float>& got,
                    const std::function<float(std::size_t)>& want) {
    for (std::size_t i = 0; i < got.size(); ++i)
      if (got[i] != want(i)) {
        failures.push_back(std::string(what) + " on rank " + std::to_string(r.comm->rank()) + ": element " +
                           std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
                           std::to_string(want(i)));
        return;
      }
  };
  std::vector<runtime::tracked_buffer> in, out;
  auto fresh = [&](std::size_t out_count) {
    in.clear();
    out.clear();
    for (auto& r : ranks) {
      in.push_back(from_formula(r, count, r.comm->rank()));
      out.push_back(runtime::tracked_buffer::allocate(*r.rt, r.s, out_count * sizeof(float)));
    }
  };
  auto each = [&](const std::function<void(local_rank&, runtime::tracked_buffer&, runtime::tracked_buffer&)>& f) {
    std::size_t k = 0;
    grouped(ranks, [&](local_rank& r) { f(r, in[k], out[k]); ++k; });
  };
  auto sum_over_ranks = [&](std::size_t i) {
    float s = 0;
    for (int q = 0; q < n; ++q) s += input(q, i);
    return s;
  };

  fresh(count);
  each([&](local_rank& r, auto& i, auto& o) { all_reduce(*r.comm, i, o, data_type::float32, reduce_op::sum, r.s); });
  for (std::size_t k = 0; k < ranks.size(); ++k) expect("all_reduce(sum)", ranks[k], to_host(ranks[k], out[k]), sum_over_ranks);

  fresh(count);
  each([&](local_rank& r, auto& i, auto& o) { all_reduce(*r.comm, i, o, data_type::float32, reduce_op::max, r.s); });
  for (std::size_t k = 0; k < ranks.size(); ++k)
    expect("all_reduce(max)", ranks[k], to_host(ranks[k], out[k]), [&](std::size_t i) { return input(n - 1, i); });

  const int root = n - 1;
  fresh(count);
  each([&](local_rank& r, auto& i, auto& o) { broadcast(*r.comm, i, o, data_type::float32, root, r.s); });
  for (std::size_t k = 0; k < ranks.size(); ++k)
    expect("broadcast", ranks[k], to_host(ranks[k], out[k]), [&](std::size_t i) { return input(root, i); });

  fresh(part);
  each([&](local_rank& r, auto& i, auto& o) { reduce_scatter(*r.comm, i, o, data_type::float32, reduce_op::sum, r.s); });
  for (std::size_t k = 0; k < ranks.size(); ++k) {
    const std::size_t base = static_cast<std::size_t>(ranks[k].comm->rank()) * part;
    expect("reduce_scatter", ranks[k], to_host(ranks[k], out[k]), [&](std::size_t j) { return sum_over_ranks(base + j); });
  }

  fresh(count * static_cast<std::size_t>(n));
  each([&](local_rank& r, auto& i, auto& o) { all_gather(*r.comm, i, o, data_type::float32, r.s); });
  for (std::size_t k = 0; k < ranks.size(); ++k)
    expect("all_gather", ranks[k], to_host(ranks[k], out[k]),
           [&](std::size_t i) { return input(static_cast<int>(i / count), i % count); });

  fresh(count);  // a ring: rank r sends to r + 1 and receives from r - 1
  each([&](local_rank& r, auto& i, auto& o) {
    collectives::send(*r.comm, i, data_type::float32, (r.comm->rank() + 1) % n, r.s);
    collectives::recv(*r.comm, o, data_type::float32, (r.comm->rank() + n - 1) % n, r.s);
  });
  for (std::size_t k = 0; k < ranks.size(); ++k)
    expect("send/recv", ranks[k], to_host(ranks[k], out[k]),
           [&](std::size_t i) { return input((ranks[k].comm->rank() + n - 1) % n, i); });
  return failures;
}

// Runs the hidden test case `name` of this executable as ranks 0 and 1 at once (CUASYNC_TEST_RANK, and
// CUASYNC_TEST_SOCKET for the id exchange), and returns both results.
inline std::vector<child_result> run_two_ranks(const std::string& name, std::chrono::seconds limit) {
  const std::string path = "/tmp/cuasync-test-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand());
  std::vector<std::future<child_result>> children;
  for (int r = 0; r < 2; ++r)
    children.push_back(std::async(std::launch::async, [&, r] {
      return run_child({name}, {"CUASYNC_TEST_RANK=" + std::to_string(r), "CUASYNC_TEST_SOCKET=" + path}, limit);
    }));
  std::vector<child_result> out;
  for (auto& c : children) out.push_back(c.get());
  return out;
}

}  // namespace cuasync::test
