// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// The replay anchor's bump: a one-thread kernel written in PTX (no NVRTC, no toolkit at run time), loaded once per
// context and kept for the process, since the graphs it was captured into may be launched until the context ends.
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/engine/replay_anchor.hpp>

#include <map>
#include <mutex>
#include <string_view>

namespace cuasync::detail {

namespace {

// counter += 1 in mapped pinned host memory. The fences keep the captured work before the mark ahead of the store as
// the host sees it (a host that reads the new count may read that work's results) and push the store out to the
// system. sm_75 is the oldest target CUDA 13 keeps; the driver compiles the PTX for the device it runs on.
constexpr char bump_ptx[] = R"(.version 7.0
.target sm_75
.address_size 64

.visible .entry cuasync_replay_bump(.param .u64 word)
{
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [word];
  membar.sys;
  ld.volatile.global.u64 %rd2, [%rd1];
  add.u64 %rd3, %rd2, 1;
  st.volatile.global.u64 [%rd1], %rd3;
  membar.sys;
  ret;
}
)";

}  // namespace

// By context id (a later context that reuses a handle gets its own); never destroyed: a module of a context that is
// gone went with it, and one of a live context stays for its graphs.
kernel_ref replay_bump_kernel(context_ref ctx, std::source_location where) {
  static std::mutex m;
  static auto* modules = new std::map<unsigned long long, module>;
  const unsigned long long id = ctx.id(where);
  std::lock_guard lock(m);
  auto it = modules->find(id);
  if (it == modules->end()) {
    // Relaxed: loading during another thread's (or this thread's) global-mode capture must not invalidate it.
    thread_capture_mode relaxed(CU_STREAM_CAPTURE_MODE_RELAXED, where);
    it = modules->emplace(id, module::load(ctx, std::string_view(bump_ptx), "cuasync_replay_bump.ptx", where)).first;
  }
  return it->second.kernel("cuasync_replay_bump", where);
}

void enqueue_replay_bump(stream_ref s, CUdeviceptr word, std::source_location where) {
  launch({s, where}, replay_bump_kernel(s.context(), where), launch_config{}, word);  // one block of one thread
}

}  // namespace cuasync::detail
