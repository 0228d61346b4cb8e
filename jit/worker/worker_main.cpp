// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// cuasync-jit-worker: one compile farm worker (jit/include/cuasync/jit/compile_farm.hpp). Started by the farm with
// posix_spawn, never by hand: `--fd=N` is its socket to the parent, `--parent=PID` the farm's process,
// `--memory-cap=BYTES` its address-space cap, `--warm` a tiny compile before it says it is ready. It loads NVRTC as the
// parent would (the same environment) and nothing of libcuda, answers each request with the compile's result or
// failure, and exits when its socket closes; it dies with its parent (PR_SET_PDEATHSIG).
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/program.hpp>

#include "farm_protocol.hpp"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

using namespace cuasync;
using namespace cuasync::jit::detail::farm;

std::uint64_t peak_rss() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

bool send(int fd, frame_type type, std::uint64_t id, std::string payload) {
  return write_all(fd, encode(frame{type, id, peak_rss(), std::move(payload)}));
}

// What jit::compile threw, as the parent will throw it again.
compile_failure failure_of(std::exception_ptr e) {
  compile_failure f;
  try {
    std::rethrow_exception(e);
  } catch (const jit::compile_error& c) {
    f.what = compile_failure::kind::compile;
    f.result = c.code().value();
    f.log = c.log();
    f.first_error = c.first_error();
  } catch (const jit::nvrtc_not_found_error& n) {
    f.what = compile_failure::kind::nvrtc_not_found;
    f.result = n.code().value();
    f.api = n.api();
    f.message = n.detail();
  } catch (const cuda_error& c) {
    f.what = c.code().category() == nvrtc_category() ? compile_failure::kind::nvrtc_call : compile_failure::kind::other;
    f.result = c.code().value();
    f.api = c.api();
    f.message = f.what == compile_failure::kind::other ? c.cause() : c.detail();
  } catch (const std::exception& x) {
    f.message = x.what();
  } catch (...) {
    f.message = "an unknown exception";
  }
  return f;
}

void limit_memory(std::uint64_t cap) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)cap;  // the sanitizers reserve terabytes of address space
#else
  if (cap == 0) return;
  const rlimit r{cap, cap};
  if (::setrlimit(RLIMIT_AS, &r) != 0) std::fprintf(stderr, "cuasync-jit-worker: setrlimit(RLIMIT_AS) failed\n");
#endif
}

std::string_view value_of(std::string_view arg, std::string_view name) {
  return arg.starts_with(name) ? arg.substr(name.size()) : std::string_view{};
}

}  // namespace

int main(int argc, char** argv) {
  int fd = -1;
  long parent = 0;
  std::uint64_t cap = 0;
  bool warm = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    if (auto v = value_of(a, "--fd="); !v.empty()) fd = std::atoi(std::string(v).c_str());
    else if (auto p = value_of(a, "--parent="); !p.empty()) parent = std::atol(std::string(p).c_str());
    else if (auto m = value_of(a, "--memory-cap="); !m.empty()) cap = std::strtoull(std::string(m).c_str(), nullptr, 0);
    else if (a == "--warm") warm = true;
  }
  if (fd < 0 || parent <= 0) {
    std::fprintf(stderr, "cuasync-jit-worker is started by cuasync's compile farm (jit::compile_farm), not by hand\n");
    return 2;
  }
  // Die with the farm's process, even one killed hard (the signal comes when the thread that started this worker ends:
  // the farm's I/O thread, which lives as long as the farm); if it is already gone, there is nobody to work for.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != static_cast<pid_t>(parent)) return 0;
  ::signal(SIGPIPE, SIG_IGN);
  const rlimit no_core{0, 0};  // a crashing compile leaves no core file behind
  ::setrlimit(RLIMIT_CORE, &no_core);
  limit_memory(cap);

  worker_hello hello;
  try {
    const jit::nvrtc_info& nvrtc = jit::nvrtc_library();
    hello.ok = true;
    hello.nvrtc_major = nvrtc.major;
    hello.nvrtc_minor = nvrtc.minor;
    hello.library = nvrtc.library;
    if (warm) {
      const jit::program tiny("cuasync_warm_up.cu", "extern \"C\" __global__ void cuasync_warm_up() {}\n");
      const int arch = nvrtc.supported_archs.empty() ? 75 : nvrtc.supported_archs.back();
      jit::compile_options plain;
      plain.toolkit_includes = false;
      try {
        jit::compile(tiny, jit::target{jit::output_kind::ptx, arch}, plain);
      } catch (const std::exception&) {
        // Only a warm-up: a real compile reports its own failure.
      }
    }
  } catch (const std::exception& e) {
    hello.error = e.what();
  }
  if (!send(fd, frame_type::hello, 0, encode_hello(hello)) || !hello.ok) return hello.ok ? 0 : 3;

  for (;;) {
    frame f;
    std::string error;
    if (!read_frame(fd, f, error)) {
      if (!error.empty()) std::fprintf(stderr, "cuasync-jit-worker: %s\n", error.c_str());
      return error.empty() ? 0 : 4;  // end of stream: the farm is done with this worker
    }
    if (f.type != frame_type::request) continue;
    std::string why;
    auto request = decode_request(f.payload, why);
    if (!request) {
      std::fprintf(stderr, "cuasync-jit-worker: %s\n", why.c_str());
      return 4;
    }
    std::string reply;
    frame_type type = frame_type::result;
    try {
      const jit::compiled_program out =
          jit::detail::compile_with_arguments(request->source, request->t, request->arguments, {});
      reply = jit::disk_cache::serialize(request->key, out);
    } catch (...) {
      type = frame_type::failure;
      reply = encode_failure(failure_of(std::current_exception()));
    }
    if (!send(fd, type, f.id, std::move(reply))) return 0;
  }
}
