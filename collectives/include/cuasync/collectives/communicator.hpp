// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! NCCL communicators, owned. Two ways to make them, as NCCL has:
//! - one process driving several GPUs: `communicator::init_all({0, 1})` (`ncclCommInitAll`), one per device;
//! - one process per GPU (how PyTorch and JAX run): rank 0 makes a `unique_id`, the application hands its 128 bytes
//!   to every other rank (`unique_id_exchange.hpp` has a helper for a local Unix socket; across nodes, the
//!   application's own bootstrap), then each calls `communicator::init_rank` (`ncclCommInitRank`).
//!
//! Communicators made together (by one `init_all`) form one fault domain: a fault seen on any of them (NCCL's
//! asynchronous error, a device error in an awaited collective, the timeout) aborts them all (`ncclCommAbort`, on a
//! thread of its own) and fails every waiter (collective_completion.hpp), so a rank whose peer died never hangs.
//! Each uses its device's primary context (the one NCCL's CUDA runtime uses); run collectives on streams of that
//! context (`device_runtime::create(device)->streams()`).
//!
//! NCCL is loaded at run time (detail/nccl_api.hpp). Before the first communicator is made, `NCCL_NVLS_ENABLE=0` is
//! set unless the environment sets it: NVLink SHARP multicast (NVLS) can take a shared host's GPUs out of service,
//! and cuasync never needs it. Set `NCCL_NVLS_ENABLE=1` yourself to use it.

#include <cuasync/collectives/detail/nccl_api.hpp>
#include <cuasync/driver/context.hpp>

#include <array>
#include <chrono>
#include <initializer_list>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <system_error>
#include <vector>

namespace cuasync::collectives {

namespace detail {
struct clique;
}

//! The 128 bytes that let ranks of one process per GPU find each other (ncclUniqueId). Made by one rank, copied to
//! all the others by the application.
struct unique_id {
  std::array<char, 128> bytes{};
  //! A new id (`ncclGetUniqueId`; it opens rank 0's bootstrap socket). @throws nccl_not_found_error, cuda_error
  static unique_id generate(std::source_location where = std::source_location::current());
  friend bool operator==(const unique_id&, const unique_id&) = default;
};

struct communicator_options {
  //! A collective awaited for longer than this aborts the fault domain and fails its waiters with
  //! `std::errc::timed_out` (0: no limit; a negative one is refused). With one process per GPU, a peer process that
  //! died can leave this rank's kernels waiting for data that never comes, and NCCL may never report it.
  std::chrono::milliseconds timeout{0};
};

//! One rank of an NCCL communicator. Move-only; the last owner of a fault domain destroys its communicators
//! (`ncclCommDestroy`, which waits for their work) unless they were aborted.
class communicator {
 public:
  communicator() = default;
  //! One communicator per device of `devices` (ordinals, distinct), rank i on devices[i], in this process.
  //! @throws cuda_error (bad devices: CUDA_ERROR_INVALID_VALUE), nccl_not_found_error, cuda_error (nccl_category)
  static std::vector<communicator> init_all(std::span<const int> devices, communicator_options options = {},
                                            std::source_location where = std::source_location::current());
  //! `init_all({0, 1})`: a braced list of ordinals (a span cannot be made from one).
  static std::vector<communicator> init_all(std::initializer_list<int> devices, communicator_options options = {},
                                            std::source_location where = std::source_location::current()) {
    return init_all(std::span<const int>(devices.begin(), devices.size()), options, where);
  }
  //! Rank `rank` of `nranks` on `device`, meeting the others through `id`. Blocks until every rank has joined.
  //! @throws as init_all
  static communicator init_rank(const unique_id& id, int nranks, int rank, int device,
                                communicator_options options = {},
                                std::source_location where = std::source_location::current());

  communicator(communicator&&) noexcept = default;
  communicator& operator=(communicator&&) noexcept = default;
  communicator(const communicator&) = delete;
  communicator& operator=(const communicator&) = delete;
  ~communicator();

  explicit operator bool() const noexcept { return clique_ != nullptr; }
  int rank() const noexcept;
  int size() const noexcept;
  int device() const noexcept;
  //! The device's primary context (held while the communicator lives).
  context_ref context() const noexcept;
  detail::nccl_comm native() const noexcept;
  //! "rank 1 of 2 on device 1".
  std::string describe() const;

  //! Empty while healthy; once the fault domain was aborted, why (nccl_category, cu_category or timed_out).
  std::error_code fault() const noexcept;
  //! What the fault was: the collective, the rank and device that saw it, NCCL's last error text.
  std::string fault_detail() const;
  //! Aborts the fault domain now: `ncclCommAbort` on a thread of its own; waiters fail with `why`.
  void abort(std::error_code why = std::make_error_code(std::errc::operation_canceled));

  //! The shared state (for the completion source and collective calls).
  const std::shared_ptr<detail::clique>& clique() const noexcept { return clique_; }
  int index() const noexcept { return index_; }

 private:
  communicator(std::shared_ptr<detail::clique> c, int index) noexcept : clique_(std::move(c)), index_(index) {}
  std::shared_ptr<detail::clique> clique_;
  int index_ = 0;
};

}  // namespace cuasync::collectives
