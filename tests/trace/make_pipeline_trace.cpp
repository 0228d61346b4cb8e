// Writes the committed test trace (tests/trace/data/pipeline_trace.json) from synthetic_pipeline.hpp:
//   make_pipeline_trace OUT.json
// CTest `trace_test_data_current` checks that the committed file is what this writes.
#include <cuasync/trace/chrome_json.hpp>

#include "synthetic_pipeline.hpp"

#include <cstdio>
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_pipeline_trace OUT.json\n");
    return 2;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  cuasync::trace::write_chrome_json(cuasync::trace::test::pipeline_timeline(), out);
  out.flush();
  if (!out) {
    std::fprintf(stderr, "make_pipeline_trace: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
