// diagnose_timeline (diagnostics_report.hpp). TEMPORARY: CUASYNC_TOOL_DIAGNOSE is defined by tools/CMakeLists.txt
// once trace/src defines trace::diagnose (declared in trace/diagnostics.hpp, being implemented); until then the
// tools say the diagnostics are not in this build. Remove the #else branch when it is merged.
#include "diagnostics_report.hpp"

#ifdef CUASYNC_TOOL_DIAGNOSE
#include <cuasync/trace/diagnostics.hpp>
#endif

namespace cuasync::tools {

diagnostics_report diagnose_timeline(const trace::timeline& t) {
  diagnostics_report r;
#ifdef CUASYNC_TOOL_DIAGNOSE
  const std::vector<trace::finding> findings = trace::diagnose(t);
  r.available = true;
  r.findings = findings.size();
  r.text = trace::to_text(findings);
  r.json = trace::to_json(findings);
#else
  (void)t;
  r.text = "not in this build (trace::diagnose is not implemented yet)\n";
  r.json = "null";
#endif
  return r;
}

}  // namespace cuasync::tools
