#pragma once
//! @file Everything of async_io: GPU completion as Boost.Asio operations.
#include <cuasync/async_io/async_compile.hpp>
#include <cuasync/async_io/async_copy.hpp>
#include <cuasync/async_io/async_launch.hpp>
#include <cuasync/async_io/async_run_blocking.hpp>
#include <cuasync/async_io/async_wait.hpp>
#include <cuasync/async_io/completion_service.hpp>
#include <cuasync/async_io/completion_source.hpp>
#include <cuasync/async_io/cuda_completion_source.hpp>
#include <cuasync/async_io/host_completion_source.hpp>
#include <cuasync/async_io/poll_policy.hpp>
