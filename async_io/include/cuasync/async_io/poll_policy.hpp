// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Moved to engine/ (the completion engine has no Asio in it): include <cuasync/engine/poll_policy.hpp>. This header
//! keeps code written against the earlier path compiling.
#include <cuasync/engine/poll_policy.hpp>
