// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
#pragma once
// The diagnostics of a recorded timeline (trace::diagnose) as the tools print them: text and JSON.
#include <cuasync/trace/timeline.hpp>

#include <cstddef>
#include <string>

namespace cuasync::tools {

struct diagnostics_report {
  std::size_t findings = 0;
  std::string text;        //!< trace::to_text
  std::string json;        //!< trace::to_json's array
};

diagnostics_report diagnose_timeline(const trace::timeline& t);

}  // namespace cuasync::tools
