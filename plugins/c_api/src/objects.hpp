#pragma once
// Internal: what the C ABI's handles refer to.
#include "completion_queue.hpp"
#include "handles.hpp"
#include "host_side_work.hpp"

#include <cuasync/driver/module.hpp>
#include <cuasync/driver/stream.hpp>
#include <cuasync/engine/admission.hpp>
#include <cuasync/engine/event_pool.hpp>
#include <cuasync/runtime/device_runtime.hpp>
#include <cuasync/runtime/pinned_pool.hpp>
#include <cuasync/runtime/tracked_buffer.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace cuasync::c_api {

struct runtime_object {
  std::shared_ptr<runtime::device_runtime> rt;
};

struct stream_object {
  std::shared_ptr<runtime_object> owner;  // null for an adopted stream without a runtime of its own
  stream owned;                           // empty for an adopted stream
  stream_ref ref;
  //! Where its places are counted, looked up once, at the first tracked operation (admission is on every copy,
  //! memset and launch). Not at creation: a stream adopted while it is being captured (PyTorch's in
  //! torch.cuda.graph) cannot be asked its id then; its untracked launches never need the site.
  const admission_site& site() const;

 private:
  mutable std::once_flag site_once_;
  mutable admission_site site_;

 public:
  //! The runtime whose staging serves pageable copies on this stream. Thread-safe. @throws abi_error
  runtime::device_runtime& staging_runtime(const char* call);

  //! Its copies' host-side work and staged copies' holds (shared: a copy finishing on a copy thread reports to it
  //! after the handle may be gone).
  const std::shared_ptr<host_side_work> host = std::make_shared<host_side_work>();

 private:
  std::mutex fallback_mutex_;
  std::shared_ptr<runtime::device_runtime> fallback_;  // for_device, for adopted streams on a primary context
};

struct event_object {
  pooled_event event;
};

struct buffer_object {
  std::shared_ptr<runtime_object> owner;
  //! The stream it is freed in the order of (device memory) or released after (imported): kept alive with it, so a
  //! stream handle destroyed first (a garbage collector's order) never leaves the free a destroyed CUstream.
  std::shared_ptr<stream_object> home;
  std::optional<runtime::tracked_buffer> device;
  std::optional<runtime::pinned_block> pinned;
  //! An imported DLPack tensor: its deleter is called once the work on `import_stream` up to the free is done; or,
  //! when `released` is set (ABI 1.1), `released` is delivered then instead and the caller calls the deleter.
  void* imported = nullptr;
  stream_ref import_stream;
  delivery released;
  void* data = nullptr;  // the memory's address (device pointer or host address)
  std::size_t size = 0;
  ~buffer_object();
};

struct module_object {
  std::shared_ptr<runtime_object> owner;
  cuasync::module mod;
  std::mutex mutex;
  //! Under `mutex`: one handle per name asked for (kernel_get returns it again: a binding that looks a kernel up on
  //! every call makes no new handle), made stale with the module's; and whether the module's handle is gone.
  std::map<std::string, std::uintptr_t, std::less<>> kernels;
  bool destroyed = false;
};

struct kernel_object {
  std::shared_ptr<module_object> module;  // the module stays loaded while a call uses the kernel
  kernel_ref kernel;
};

//! The objects of the handles in a call's arguments.
inline std::shared_ptr<runtime_object> runtime_of(cuasync_runtime h, const char* what) {
  return registry::instance().get<runtime_object>(h, kind::runtime, what);
}
inline std::shared_ptr<stream_object> stream_of(cuasync_stream h, const char* what) {
  return registry::instance().get<stream_object>(h, kind::stream, what);
}

}  // namespace cuasync::c_api
