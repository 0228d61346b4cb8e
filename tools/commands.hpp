// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The subcommands of the `cuasync` command, each defined with its options and help text in its own file.
#include "cli.hpp"
#include "options.hpp"

namespace cuasync::tools {
extern const command info_command;
#ifdef CUASYNC_TOOL_COMPILE
extern const command compile_command;
#endif
#ifdef CUASYNC_TOOL_DEMO
extern const command demo_command;
extern const command doctor_command;
#endif
extern const command bench_command;
extern const command trace_command;
}  // namespace cuasync::tools
