#pragma once
// The diagnostics of a recorded timeline (trace::diagnose), behind one function so that the tools build before and
// after trace/ implements them.
#include <cuasync/trace/timeline.hpp>

#include <cstddef>
#include <string>

namespace cuasync::tools {

struct diagnostics_report {
  bool available = false;  //!< false: this build's trace/ has no diagnose() yet
  std::size_t findings = 0;
  std::string text;        //!< trace::to_text, or why there is none
  std::string json;        //!< trace::to_json's array, or "null"
};

diagnostics_report diagnose_timeline(const trace::timeline& t);

}  // namespace cuasync::tools
