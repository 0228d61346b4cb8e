// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! The small part of NCCL's C API that cuasync uses, declared here (NCCL's header is not needed to build), and
//! the entry points fetched once from the loaded libnccl. The values are NCCL's ABI (nccl.h since 2.x, unchanged
//! through 2.28); only what cuasync calls is declared.

#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

namespace cuasync::collectives::detail {

struct nccl_comm_opaque;  // NCCL's `struct ncclComm`, never dereferenced
using nccl_comm = nccl_comm_opaque*;  // ncclComm_t

//! ncclResult_t.
enum nccl_result : int {
  nccl_success = 0,
  nccl_unhandled_cuda_error = 1,
  nccl_system_error = 2,
  nccl_internal_error = 3,
  nccl_invalid_argument = 4,
  nccl_invalid_usage = 5,
  nccl_remote_error = 6,
  nccl_in_progress = 7,
};

//! ncclUniqueId: 128 opaque bytes, copied between ranks by the application.
struct nccl_unique_id {
  char internal[128];
};
static_assert(sizeof(nccl_unique_id) == 128);

using nccl_get_version_fn = nccl_result (*)(int* version);
using nccl_get_unique_id_fn = nccl_result (*)(nccl_unique_id* id);
using nccl_comm_init_rank_fn = nccl_result (*)(nccl_comm* comm, int nranks, nccl_unique_id id, int rank);
using nccl_comm_init_all_fn = nccl_result (*)(nccl_comm* comms, int ndev, const int* devices);
using nccl_comm_fn = nccl_result (*)(nccl_comm comm);  // ncclCommDestroy, ncclCommAbort
using nccl_comm_get_async_error_fn = nccl_result (*)(nccl_comm comm, nccl_result* async_error);
using nccl_comm_int_fn = nccl_result (*)(nccl_comm comm, int* out);  // ncclCommCount, CuDevice, UserRank
using nccl_get_error_string_fn = const char* (*)(nccl_result r);
using nccl_get_last_error_fn = const char* (*)(nccl_comm comm);
using nccl_group_fn = nccl_result (*)();
using nccl_all_reduce_fn = nccl_result (*)(const void* send, void* recv, std::size_t count, int type, int op,
                                           nccl_comm comm, CUstream s);
using nccl_broadcast_fn = nccl_result (*)(const void* send, void* recv, std::size_t count, int type, int root,
                                          nccl_comm comm, CUstream s);
using nccl_reduce_scatter_fn = nccl_result (*)(const void* send, void* recv, std::size_t recv_count, int type, int op,
                                               nccl_comm comm, CUstream s);
using nccl_all_gather_fn = nccl_result (*)(const void* send, void* recv, std::size_t send_count, int type,
                                           nccl_comm comm, CUstream s);
using nccl_send_fn = nccl_result (*)(const void* buf, std::size_t count, int type, int peer, nccl_comm comm,
                                     CUstream s);
using nccl_recv_fn = nccl_result (*)(void* buf, std::size_t count, int type, int peer, nccl_comm comm, CUstream s);

// (member, symbol, type): every one is required (all exist since NCCL 2.7); ncclGetLastError (2.13) and
// ncclCommFinalize (2.14) are optional, fetched beside them.
#define CUASYNC_NCCL_ENTRY_POINTS(X)                                                                         \
  X(get_version, ncclGetVersion, nccl_get_version_fn)                                                      \
  X(get_unique_id, ncclGetUniqueId, nccl_get_unique_id_fn)                                                 \
  X(comm_init_rank, ncclCommInitRank, nccl_comm_init_rank_fn)                                              \
  X(comm_init_all, ncclCommInitAll, nccl_comm_init_all_fn)                                                 \
  X(comm_destroy, ncclCommDestroy, nccl_comm_fn)                                                           \
  X(comm_abort, ncclCommAbort, nccl_comm_fn)                                                               \
  X(comm_get_async_error, ncclCommGetAsyncError, nccl_comm_get_async_error_fn)                             \
  X(comm_count, ncclCommCount, nccl_comm_int_fn)                                                           \
  X(comm_cu_device, ncclCommCuDevice, nccl_comm_int_fn)                                                    \
  X(comm_user_rank, ncclCommUserRank, nccl_comm_int_fn)                                                    \
  X(get_error_string, ncclGetErrorString, nccl_get_error_string_fn)                                        \
  X(group_start, ncclGroupStart, nccl_group_fn)                                                            \
  X(group_end, ncclGroupEnd, nccl_group_fn)                                                                \
  X(all_reduce, ncclAllReduce, nccl_all_reduce_fn)                                                         \
  X(broadcast, ncclBroadcast, nccl_broadcast_fn)                                                           \
  X(reduce_scatter, ncclReduceScatter, nccl_reduce_scatter_fn)                                             \
  X(all_gather, ncclAllGather, nccl_all_gather_fn)                                                         \
  X(send, ncclSend, nccl_send_fn)                                                                          \
  X(recv, ncclRecv, nccl_recv_fn)

//! Every entry point, resolved. Obtained from `nccl()`.
struct nccl_entry_points {
#define CUASYNC_DECLARE_NCCL_ENTRY(member, symbol, type) type member = nullptr;
  CUASYNC_NCCL_ENTRY_POINTS(CUASYNC_DECLARE_NCCL_ENTRY)
#undef CUASYNC_DECLARE_NCCL_ENTRY
  nccl_get_last_error_fn get_last_error = nullptr;  //!< optional (NCCL 2.13+)
  nccl_comm_fn comm_finalize = nullptr;              //!< optional (NCCL 2.14+): ncclCommFinalize
  int version = 0;      //!< ncclGetVersion, e.g. 22809 for 2.28.9
  std::string library;  //!< the path that was opened
};

//! Opens NCCL once (`$CUASYNC_LIBNCCL`, else `libnccl.so.2`, else the Python environments' `nvidia/nccl/lib`) and
//! resolves every entry point; not cached, for tests. The library stays loaded for the life of the process (NCCL's
//! threads and CUDA state are never unloaded safely). @throws nccl_not_found_error, nccl_too_old_error
std::unique_ptr<const nccl_entry_points> open_nccl();

//! The entry points: loads NCCL on first use (thread-safe; a failed load is remembered and thrown again).
//! @throws nccl_not_found_error, nccl_too_old_error
const nccl_entry_points& nccl();

//! The entry points when NCCL is loaded already, else null (never loads it). Thread-safe.
const nccl_entry_points* nccl_if_loaded() noexcept;

//! Sets `NCCL_NVLS_ENABLE=0` unless the environment already sets it (docs/scale-out.md: NVLink multicast can take a
//! shared host's GPUs out of service); called before every communicator is made.
void default_nvls_off() noexcept;

}  // namespace cuasync::collectives::detail
