// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Handing rank 0's `unique_id` to the other ranks of one host over a Unix socket: a helper for one process per
//! GPU on one machine. Across nodes the application uses its own bootstrap (a launcher's key-value store, MPI, a TCP
//! rendezvous): the id is 128 plain bytes.
//!
//! The wire format is a 16-byte tag ("cuasync-ncclid-2") then the 128 bytes, once per connection; the fetcher answers
//! with one byte ('k'), so that the publisher counts only the ranks that have the id.

#include <cuasync/collectives/communicator.hpp>

#include <chrono>
#include <source_location>
#include <string>

namespace cuasync::collectives {

//! Serves `id` on the Unix socket `path` (a socket file there, left by an earlier run, is replaced; any other file
//! is refused) until `receivers` processes have fetched it, then removes the socket if it is still its own (another
//! publisher may have replaced it). Only a client that acknowledges the id is counted: one that leaves (before or
//! after the send) is not. Blocking.
//! @throws cuda_error (`std::errc` codes: timed_out after `timeout`, file_exists for a path that is not a socket,
//! or the failed system call's errno; CUDA_ERROR_INVALID_VALUE for a path too long for a socket address)
void publish_unique_id(const unique_id& id, const std::string& path, int receivers,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60),
                       std::source_location where = std::source_location::current());

//! Fetches the id served on `path`, waiting (retrying every millisecond) for the socket to appear. Blocking.
//! @throws cuda_error (timed_out, errno, or a peer that does not speak this format: std::errc::protocol_error)
unique_id fetch_unique_id(const std::string& path, std::chrono::milliseconds timeout = std::chrono::seconds(60),
                          std::source_location where = std::source_location::current());

//! Rank 0 generates the id (`unique_id::generate`) and publishes it to `nranks - 1` receivers; the other ranks fetch
//! it. Every rank returns the same id. @throws as above, and nccl_not_found_error on rank 0
unique_id exchange_unique_id(int rank, int nranks, const std::string& path,
                             std::chrono::milliseconds timeout = std::chrono::seconds(60),
                             std::source_location where = std::source_location::current());

}  // namespace cuasync::collectives
