// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Everything in the jit layer.
#include <cuasync/jit/cache_index.hpp>
#include <cuasync/jit/cache_key.hpp>
#include <cuasync/jit/compile_farm.hpp>
#include <cuasync/jit/compiler.hpp>
#include <cuasync/jit/disk_cache.hpp>
#include <cuasync/jit/error.hpp>
#include <cuasync/jit/link.hpp>
#include <cuasync/jit/nvjitlink.hpp>
#include <cuasync/jit/nvrtc.hpp>
#include <cuasync/jit/nvrtc_identity.hpp>
#include <cuasync/jit/options.hpp>
#include <cuasync/jit/program.hpp>
#include <cuasync/jit/target.hpp>
