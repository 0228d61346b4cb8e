#pragma once
//! @file Everything in the driver layer.
#include <cuasync/driver/context.hpp>
#include <cuasync/driver/copy.hpp>
#include <cuasync/driver/device.hpp>
#include <cuasync/driver/device_buffer.hpp>
#include <cuasync/driver/device_span.hpp>
#include <cuasync/driver/error.hpp>
#include <cuasync/driver/event.hpp>
#include <cuasync/driver/host_registration.hpp>
#include <cuasync/driver/kernel.hpp>
#include <cuasync/driver/launch.hpp>
#include <cuasync/driver/managed_buffer.hpp>
#include <cuasync/driver/memory_pool.hpp>
#include <cuasync/driver/module.hpp>
#include <cuasync/driver/pinned_buffer.hpp>
#include <cuasync/driver/pointer_info.hpp>
#include <cuasync/driver/stream.hpp>
