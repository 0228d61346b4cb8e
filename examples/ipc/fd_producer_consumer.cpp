// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Two processes, two GPUs, one buffer, the VMM path: the producer (GPU 0) allocates memory that can be exported as
// a POSIX file descriptor, fills it, and passes the descriptor with the size and its device over a Unix socketpair
// (SCM_RIGHTS); the consumer (GPU 1, this program re-run with --consume) maps it, copies it to the host and checks
// every byte. With one GPU both processes use it.
//   example_ipc_fd_producer_consumer     prints "ipc (fd): consumer on device 1 read 64 MiB from device 0: OK"
#include <cuasync/driver.hpp>

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <vector>

using namespace cuasync;

namespace {

constexpr std::size_t bytes = std::size_t{64} << 20;
constexpr std::uint32_t pattern = 0xc0ffee11;

// What travels beside the descriptor.
struct payload {
  std::uint64_t size = 0;
  std::int32_t device = -1;
};

int consume(int socket) {
  const int dev = device::count() > 1 ? 1 : 0;
  primary_context ctx = primary_context::retain(dev);
  payload p;
  unique_fd fd = receive_fd(socket, std::as_writable_bytes(std::span(&p, 1)));
  int bad = 1;
  {
    // A mapping of the producer's memory: device `dev` reaches it as a peer when it is another GPU.
    shareable_mapping theirs = shareable_mapping::open(ctx, fd.get(), p.size, p.device);
    fd.reset();  // the mapping keeps the memory; the descriptor is no longer needed
    stream s = stream::create(ctx);
    std::vector<std::uint32_t> host(p.size / 4);
    copy_async(s, std::span<std::uint32_t>(host), theirs.span());  // pageable: waits until done
    s.synchronize();
    bad = 0;
    for (std::uint32_t v : host) bad += v != pattern;
    std::printf("ipc (fd): consumer on device %d read %zu MiB from device %d: %s\n", dev,
                static_cast<std::size_t>(p.size >> 20), p.device, bad ? "MISMATCH" : "OK");
  }
  const char done = bad ? 'x' : 'k';
  if (::write(socket, &done, 1) != 1) return 1;
  return bad ? 1 : 0;
}

int produce(int child_end, int my_end) {
  primary_context ctx = primary_context::retain(0);
  if (!shareable_allocation::supported(ctx.device())) {
    std::fprintf(stderr, "ipc (fd): device 0 cannot export memory as a POSIX file descriptor\n");
    return 1;
  }
  shareable_allocation memory = shareable_allocation::allocate(ctx, bytes);  // cuMemCreate, mapped here
  stream s = stream::create(ctx);
  memset32_async(s, memory.span(), pattern);
  s.synchronize();  // filled before the consumer can read (the legacy example waits on an interprocess event)
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child_end, 3);  // the consumer's end of the socketpair is its fd 3
  char* argv[] = {const_cast<char*>("example_ipc_fd_producer_consumer"), const_cast<char*>("--consume"), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (spawned != 0) {
    std::fprintf(stderr, "ipc (fd): could not start the consumer: %s\n", std::strerror(spawned));
    return 1;
  }
  ::close(child_end);  // the consumer's copy is its own: a consumer that dies now reads as a hang-up here
  {
    const payload p{memory.size(), ctx.device_ordinal()};
    unique_fd exported = memory.export_fd();
    send_fd(my_end, exported.get(), std::as_bytes(std::span(&p, 1)));
  }  // our descriptor is closed; the consumer holds its own
  char done = 0;
  const bool answered = ::read(my_end, &done, 1) == 1;  // the consumer has read everything: memory may go now
  int status = 0;
  ::waitpid(pid, &status, 0);
  return answered && done == 'k' && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--consume") == 0) return consume(3);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) {
      std::perror("ipc (fd): socketpair");
      return 1;
    }
    return produce(pair[0], pair[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc (fd): %s\n", e.what());
    return 1;
  }
}
