// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Everything of async_io: GPU completion as Boost.Asio operations.
#include <cuasync/async_io/async_compile.hpp>
#include <cuasync/async_io/async_copy.hpp>
#include <cuasync/async_io/async_copy_peer.hpp>
#include <cuasync/async_io/async_graph.hpp>
#include <cuasync/async_io/async_replay.hpp>
#include <cuasync/async_io/async_launch.hpp>
#include <cuasync/async_io/async_pipeline.hpp>
#include <cuasync/async_io/async_run_blocking.hpp>
#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/async_io/completion_service.hpp>
#include <cuasync/async_io/error_tokens.hpp>
#include <cuasync/async_io/failure_detail.hpp>
#include <cuasync/engine/cuda_completion_source.hpp>
#include <cuasync/engine/host_completion_source.hpp>
#include <cuasync/engine/poll_policy.hpp>
