// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Two processes, two GPUs, one buffer: the producer (GPU 0) fills device memory and records an interprocess event;
// the consumer (GPU 1, this program re-run with --consume) maps the memory, makes its stream wait on the event on
// the device, copies the data to its own GPU and checks it. The handles travel over a Unix socketpair inherited by
// the consumer. With one GPU both processes use it.
//   example_ipc_producer_consumer            prints "ipc: consumer on device 1 read 64 MiB from device 0: OK"
#include <cuasync/driver.hpp>

#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

using namespace cuasync;

namespace {

constexpr std::size_t bytes = std::size_t{64} << 20;
constexpr std::uint32_t pattern = 0x5eedc0de;

void send_all(int fd, const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = ::write(fd, c, n);
    if (k <= 0) throw std::runtime_error("ipc example: write to the other process failed");
    c += k;
    n -= static_cast<std::size_t>(k);
  }
}
void receive_all(int fd, void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    ssize_t k = ::read(fd, c, n);
    if (k <= 0) throw std::runtime_error("ipc example: the other process hung up");
    c += k;
    n -= static_cast<std::size_t>(k);
  }
}

int consume(int fd) {
  const int dev = device::count() > 1 ? 1 : 0;
  primary_context ctx = primary_context::retain(dev);
  stream s = stream::create(ctx);
  std::array<std::byte, ipc_memory_handle::wire_size> wire;
  ipc_event_handle eh;
  receive_all(fd, wire.data(), wire.size());
  receive_all(fd, &eh.handle, sizeof eh.handle);
  const ipc_memory_handle mh = ipc_memory_handle::from_bytes(wire);
  {
    ipc_mapping theirs = ipc_mapping::open(ctx, mh);  // the producer frees its buffer only after this process ends
    event ready = eh.open(ctx);
    s.wait(ready);  // on the device: the producer's fill is done before the copy starts
    device_buffer mine = device_buffer::allocate(ctx, bytes);
    // The mapping is an address of this process (unified addressing): a plain device-to-device copy reads the
    // other GPU's memory over the link (peer access was enabled lazily when it was opened).
    copy_async(s, mine.span(), theirs.span());
    std::vector<std::uint32_t> host(bytes / 4);
    copy_async(s, std::as_writable_bytes(std::span(host)), mine.span());  // pageable: waits until done
    s.synchronize();
    std::size_t bad = 0;
    for (std::uint32_t v : host) bad += v != pattern;
    std::printf("ipc: consumer on device %d read %zu MiB from device %d: %s\n", dev, bytes >> 20, mh.device,
                bad ? "MISMATCH" : "OK");
    const char done = bad ? 'x' : 'k';
    send_all(fd, &done, 1);
    return bad ? 1 : 0;
  }
}

int produce(int child_end, int my_end, const char* self) {
  primary_context ctx = primary_context::retain(0);
  stream s = stream::create(ctx);
  device_buffer b = device_buffer::allocate(ctx, bytes);  // cuMemAlloc: exportable (pool memory is not)
  event filled = event::create(ctx, {.interprocess = true});
  // Hand the handles over first: the consumer's stream waits on the event, so it may start before the fill.
  const auto wire = ipc_memory_handle::of(b.span(), ctx).to_bytes();
  const ipc_event_handle eh = ipc_event_handle::of(filled);
  memset32_async(s, b.span(), pattern);
  filled.record(s);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, child_end, 3);  // the consumer's end of the socketpair is its fd 3
  char* argv[] = {const_cast<char*>(self), const_cast<char*>("--consume"), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv, environ) != 0) {
    std::fprintf(stderr, "ipc: could not start the consumer\n");
    return 1;
  }
  send_all(my_end, wire.data(), wire.size());
  send_all(my_end, &eh.handle, sizeof eh.handle);
  char done = 0;
  receive_all(my_end, &done, 1);  // the consumer is done reading; b is freed after it has exited
  int status = 0;
  ::waitpid(pid, &status, 0);
  s.synchronize();
  return done == 'k' && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc > 1 && std::strcmp(argv[1], "--consume") == 0) return consume(3);
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return 1;
    return produce(pair[0], pair[1], argv[0]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ipc: %s\n", e.what());
    return 1;
  }
}
