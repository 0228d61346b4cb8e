// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
//! @file
//! Everything in the trace layer: the recorder, scoped labels and spans, the GPU clock map, the exporters
//! (Chrome trace JSON and its reader, the HTML page), the overlap summary and the diagnostics. docs/tracing.md
//! describes them.
#include <cuasync/trace/chrome_json.hpp>
#include <cuasync/trace/clock.hpp>
#include <cuasync/trace/diagnostics.hpp>
#include <cuasync/trace/html.hpp>
#include <cuasync/trace/overlap.hpp>
#include <cuasync/trace/recorder.hpp>
#include <cuasync/trace/scope.hpp>
#include <cuasync/trace/span.hpp>
#include <cuasync/trace/timeline.hpp>
