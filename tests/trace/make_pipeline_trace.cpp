// SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
// Writes the committed test trace (tests/trace/data/pipeline_trace.json) from synthetic_pipeline.hpp:
//   make_pipeline_trace OUT.json
// CTest `trace_test_data_current` checks that the committed file is what this writes. With a count of bursts and
// batches per burst, writes the scaled pipeline instead (8 spans per batch; CTest trace_timeline_100k_spans):
//   make_pipeline_trace OUT.json BURSTS BATCHES_PER_BURST
// A name ending in ".html" writes the HTML page instead (trace::write_file).
#include <cuasync/trace/recorder.hpp>

#include "synthetic_pipeline.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: make_pipeline_trace OUT.json [BURSTS BATCHES_PER_BURST]\n");
    return 2;
  }
  namespace test = cuasync::trace::test;
  int bursts = 0, batches = 0;
  if (argc == 4) {
    bursts = std::atoi(argv[2]);
    batches = std::atoi(argv[3]);
    if (bursts < 1 || batches < 1 || bursts > 1'000'000 || batches > 1'000'000) {
      std::fprintf(stderr, "make_pipeline_trace: BURSTS and BATCHES_PER_BURST are counts from 1 to 1000000\n");
      return 2;
    }
  }
  try {
    cuasync::trace::write_file(argc == 4 ? test::scaled_pipeline_timeline(bursts, batches) : test::pipeline_timeline(),
                               argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_pipeline_trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
