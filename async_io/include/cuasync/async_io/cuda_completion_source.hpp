// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Moved to engine/ (the completion engine has no Asio in it): include <cuasync/engine/cuda_completion_source.hpp>. This header
//! keeps code written against the earlier path compiling.
#include <cuasync/engine/cuda_completion_source.hpp>
