// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// bench/multi_gpu: what cuasync costs on several GPUs, against the raw calls in the same process.
//   cuasync_multi_gpu_bench OUT [--quick]   one process driving both GPUs, then two children, one per GPU
// Writes OUT/multi_gpu.{json,md} (this process) and OUT/multi_gpu_per_process.{json,md} (rank 0's child).
// NCCL_NVLS_ENABLE=0 is the default the collectives set (NVLink multicast can take a shared host's GPUs down).
#include "multi_gpu_bench.hpp"

#include <cuasync/collectives/detail/nccl_api.hpp>
#include <cuasync/collectives/unique_id_exchange.hpp>

#include "child_process.hpp"

#include <cstdio>
#include <cstring>
#include <future>
#include <unistd.h>

namespace b = cuasync::bench;
namespace mg = cuasync::bench::multi_gpu;
using namespace cuasync;

namespace {

std::string nccl_identity() {
  const auto& n = collectives::detail::nccl();
  return std::to_string(n.version) + " (" + n.library + ")";
}

std::string peer_matrix() {
  std::string m;
  for (device a : device::all())
    for (device c : device::all())
      if (!(a == c))
        m += std::to_string(a.ordinal()) + "->" + std::to_string(c.ordinal()) + (a.can_access_peer(c) ? " yes; " : " no; ");
  return m;
}

int rank_main(const std::string& out, int rank, const std::string& socket, bool quick) {
  const collectives::unique_id id = collectives::exchange_unique_id(rank, 2, socket, std::chrono::seconds(120));
  std::vector<collectives::communicator> comms;
  comms.push_back(collectives::communicator::init_rank(id, 2, rank, rank));
  mg::device_side side = mg::side_of(rank);
  b::report rep("multi_gpu_per_process");
  rep.note("mode", "one process per GPU (this is rank 0's view), unique id over a Unix socket");
  rep.note("nccl", nccl_identity());
  mg::all_reduce_bench(rep, comms, {&side}, "1 process per GPU", quick);
  if (rank == 0) rep.write(out);
  return 0;
}

}  // namespace

int run(int argc, char** argv);

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::printf("multi_gpu bench failed: %s\n", e.what());
    return 1;
  }
}

int run(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // line by line: a run killed by a time limit still shows its progress
  const std::string out = b::output_dir(argc, argv);
  bool quick = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    if (std::strcmp(argv[i], "--rank") == 0 && i + 2 < argc) return rank_main(out, std::atoi(argv[i + 1]), argv[i + 2], quick);
  }
  if (device::count() < 2) {
    std::printf("multi_gpu bench: needs 2 devices, found %d; nothing measured\n", device::count());
    return 0;
  }
  b::report rep("multi_gpu");
  rep.note("devices", device::get(0).name() + " x " + std::to_string(device::count()));
  rep.note("peer access", peer_matrix());
  rep.note("nccl", nccl_identity());
  {
    mg::device_side d0 = mg::side_of(0), d1 = mg::side_of(1);
    std::printf("peer copies...\n");
    mg::peer_copy_bench(rep, d0, d1);
    std::printf("all-reduce, one process driving both GPUs...\n");
    auto comms = collectives::communicator::init_all(std::vector<int>{0, 1});
    mg::all_reduce_bench(rep, comms, {&d0, &d1}, "1 process, 2 GPUs", quick);
  }
  rep.write(out);
  std::printf("all-reduce, one process per GPU...\n");
  const std::string socket = "/tmp/cuasync-bench-ncclid-" + std::to_string(::getpid());
  std::vector<std::future<test::child_result>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::async(std::launch::async, [&, r] {
      std::vector<std::string> args{out, "--rank", std::to_string(r), socket};
      if (quick) args.push_back("--quick");
      return test::run_child(args, {}, std::chrono::seconds(240));
    }));
  int rc = 0;
  for (int r = 0; r < 2; ++r) {
    const auto c = ranks[r].get();
    std::printf("-- rank %d (exit %d%s):\n%s\n", r, c.exit_code, c.timed_out ? ", timed out" : "", c.output.c_str());
    if (c.exit_code != 0 || c.timed_out) rc = 1;
  }
  return rc;
}
