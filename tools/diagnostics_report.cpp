// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// diagnose_timeline (diagnostics_report.hpp): trace::diagnose's findings as text and JSON for the tools.
#include "diagnostics_report.hpp"

#include <cuasync/trace/diagnostics.hpp>

namespace cuasync::tools {

diagnostics_report diagnose_timeline(const trace::timeline& t) {
  diagnostics_report r;
  const std::vector<trace::finding> findings = trace::diagnose(t);
  r.findings = findings.size();
  r.text = trace::to_text(findings);
  r.json = trace::to_json(findings);
  return r;
}

}  // namespace cuasync::tools
