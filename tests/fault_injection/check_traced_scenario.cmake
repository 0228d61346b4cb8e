# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The scenario once on the simulated driver with tracing on (CUASYNC_TRACE): every instrumented path of the driver,
# jit, runtime and async_io layers runs, the rounds succeed, and the written trace has a span of each kind and the
# flow events that link issues to their GPU spans.
#   cmake -DSCENARIO=... -DLIBCUDA=... -DOUT=trace.json -P check_traced_scenario.cmake
file(REMOVE "${OUT}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env CUASYNC_LIBCUDA=${LIBCUDA} CUASYNC_TRACE=${OUT}
          CUASYNC_CACHE_DIR=/tmp/cuasync-fault-injection-cache "${SCENARIO}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the traced scenario exited with ${rc}:\n${out}\n${err}")
endif()
foreach(round 1 2 3)
  if(NOT out MATCHES "round${round}: ok")
    message(FATAL_ERROR "round ${round} failed with tracing on:\n${out}")
  endif()
endforeach()
if(NOT EXISTS "${OUT}")
  message(FATAL_ERROR "no trace was written at exit:\n${err}")
endif()
file(READ "${OUT}" trace)
foreach(expected "\"cat\":\"launch\"" "\"name\":\"H2D staged chunk\"" "\"name\":\"D2H copy\"" "\"cat\":\"memset\""
                 "\"name\":\"cuMemAlloc\"" "\"name\":\"cuMemFree\"" "\"name\":\"cuMemHostAlloc\""
                 "\"name\":\"cuMemAllocFromPoolAsync\"" "\"name\":\"cuStreamSynchronize\""
                 "\"name\":\"cuCtxSynchronize\"" "\"name\":\"host memcpy\"" "\"name\":\"await"
                 "\"cat\":\"module_load\""
                 # a flow from a host issue to the GPU span it issued (span::flow, given by the driver's hooks)
                 "{\"ph\":\"s\",\"name\":\"issue\"" "{\"ph\":\"f\",\"name\":\"issue\"")
  string(FIND "${trace}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the trace has no span with ${expected}")
  endif()
endforeach()
