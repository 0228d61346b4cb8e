// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The C ABI as a framework sees it in a fault test: libcuasync.so opened with dlopen (its own engine and driver
// loader, beside the C++ library in the same process), a runtime on device 0's primary context, a framework's stream
// adopted, and one queue whose completions arrive both ways: callbacks (counted here) and records drained from its
// fd. Calls that fail throw std::runtime_error with the library's message.
#include "child_process.hpp"

#include <cuasync/cuasync.h>

#include <dlfcn.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace cuasync::test {

//! libcuasync.so of this build: <build>/plugins, two levels above this executable (<build>/tests/fault_injection).
inline std::string c_abi_library() {
  std::string self = self_path();
  for (int i = 0; i < 3; ++i) self = self.substr(0, self.rfind('/'));
  return self + "/plugins/libcuasync.so";
}

class c_abi_client {
 public:
  struct failure {
    cuasync_error_code code = CUASYNC_OK;
    int cuda_result = 0;
    std::string message;
  };

  //! Opens `library`, makes a runtime on device 0 and adopts `native` (a CUstream of that device's primary context).
  c_abi_client(const std::string& library, void* native) {
    lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib_) throw std::runtime_error("dlopen " + library + ": " + dlerror());
    auto get = reinterpret_cast<cuasync_get_api_fn>(dlsym(lib_, "cuasync_get_api"));
    if (!get) throw std::runtime_error("no cuasync_get_api in " + library);
    check(get(CUASYNC_ABI_MAJOR, &api_), "cuasync_get_api");
    cuasync_runtime_create_args rc{CUASYNC_RUNTIME_CREATE_ARGS_SIZE};
    check(api_->runtime_create(&rc), "runtime_create");
    runtime_ = rc.runtime;
    cuasync_stream_create_args sc{CUASYNC_STREAM_CREATE_ARGS_SIZE};
    sc.runtime = runtime_;
    sc.native = native;
    check(api_->stream_create(&sc), "stream_create (adopt)");
    stream_ = sc.stream;
    cuasync_queue_create_args qc{CUASYNC_QUEUE_CREATE_ARGS_SIZE, CUASYNC_QUEUE_FD | CUASYNC_QUEUE_CALLBACKS};
    check(api_->queue_create(&qc), "queue_create");
    queue_ = qc.queue;
    cuasync_queue_fd_args qf{CUASYNC_QUEUE_FD_ARGS_SIZE, queue_};
    check(api_->queue_fd(&qf), "queue_fd");
    fd_ = qf.fd;
  }
  c_abi_client(const c_abi_client&) = delete;
  c_abi_client& operator=(const c_abi_client&) = delete;
  ~c_abi_client() { teardown(); }

  const cuasync_api& api() const { return *api_; }
  cuasync_runtime runtime() const { return runtime_; }
  cuasync_stream stream() const { return stream_; }

  //! Where a completion goes: the fd with `token`, or (callback = true) a callback that records it.
  cuasync_completion completion(std::uint64_t token, bool callback) {
    cuasync_completion c{queue_, token};
    if (callback) {
      c.callback = &c_abi_client::on_callback;
      c.user_data = this;
    }
    return c;
  }

  //! Throws on an error, with its message.
  void check(cuasync_error* e, const char* call) {
    if (!e) return;
    const failure f = take(e);
    throw std::runtime_error(std::string(call) + ": " + f.message);
  }
  //! The error's code, CUDA result and message; frees it.
  failure take(cuasync_error* e) {
    failure f;
    if (!e) return f;
    cuasync_error_info_args info{CUASYNC_ERROR_INFO_ARGS_SIZE, e};
    api_->error_info(&info);
    f = {info.code, info.cuda_result, info.message};
    api_->error_destroy(e);
    return f;
  }

  //! Records drained from the fd (poll, drain, then re-check) until `want` arrived or `limit` passed.
  std::vector<cuasync_completion_record> drain(std::size_t want, std::chrono::milliseconds limit) {
    std::vector<cuasync_completion_record> got;
    const auto end = std::chrono::steady_clock::now() + limit;
    while (got.size() < want && std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      cuasync_completion_record recs[16];
      cuasync_queue_drain_args d{CUASYNC_QUEUE_DRAIN_ARGS_SIZE, queue_, recs, 16};
      check(api_->queue_drain(&d), "queue_drain");
      got.insert(got.end(), recs, recs + d.count);
    }
    return got;
  }
  //! Callback records seen so far, waiting until `want` arrived or `limit` passed.
  std::vector<cuasync_completion_record> callbacks(std::size_t want, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    for (;;) {
      {
        std::lock_guard lock(m_);
        if (called_.size() >= want || std::chrono::steady_clock::now() >= end) return called_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  //! Destroys the queue (completions not yet delivered are dropped), the stream and the runtime; returns what each
  //! destroy reported (after a sticky fault they may report it), one line each.
  std::vector<std::string> teardown() {
    std::vector<std::string> said;
    auto note = [&](cuasync_error* e, const char* call) {
      if (e) said.push_back(std::string(call) + ": " + take(e).message);
    };
    if (queue_) {
      cuasync_queue_destroy_args a{CUASYNC_QUEUE_DESTROY_ARGS_SIZE, queue_};
      note(api_->queue_destroy(&a), "queue_destroy");
      queue_ = nullptr;
    }
    if (stream_) {
      cuasync_stream_destroy_args a{CUASYNC_STREAM_DESTROY_ARGS_SIZE, stream_};
      note(api_->stream_destroy(&a), "stream_destroy");
      stream_ = nullptr;
    }
    if (runtime_) {
      cuasync_runtime_destroy_args a{CUASYNC_RUNTIME_DESTROY_ARGS_SIZE, runtime_};
      note(api_->runtime_destroy(&a), "runtime_destroy");
      runtime_ = nullptr;
    }
    return said;  // the library stays loaded: its threads may outlive this object
  }

 private:
  static void on_callback(const cuasync_completion_record* r, void* user) {
    auto* self = static_cast<c_abi_client*>(user);
    std::lock_guard lock(self->m_);
    self->called_.push_back(*r);
  }

  void* lib_ = nullptr;
  const cuasync_api* api_ = nullptr;
  cuasync_runtime runtime_ = nullptr;
  cuasync_stream stream_ = nullptr;
  cuasync_queue queue_ = nullptr;
  int fd_ = -1;
  std::mutex m_;
  std::vector<cuasync_completion_record> called_;
};

}  // namespace cuasync::test
