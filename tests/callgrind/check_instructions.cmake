# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs PROGRAM (tests/callgrind/awaited_launch_loop.cpp, launch_loop.cpp) under callgrind on the simulated driver
# LIBCUDA, takes thread 1's instruction count of the measured loop (the dump named DUMP, "awaited launches" unless
# given) per launch, and compares it with the figure committed in FIGURE: more than 10% above it fails. With
# -DUPDATE=1 it writes the figure instead (after a change that is meant to cost more or less: commit the new file with
# the reason). MODE (launch_loop's first argument) and EXTRA (arguments after the count) are passed to PROGRAM;
# WHAT says what the figure counts; INSTR_ATSTART=no starts instrumentation at the program's request (its setup runs
# uninstrumented, at a fraction of callgrind's cost); COLLECT_ATSTART=no counts only what the program's
# CALLGRIND_TOGGLE_COLLECT brackets.
# cmake -DVALGRIND=... -DPROGRAM=... -DLIBCUDA=... -DLAUNCHES=N -DFIGURE=... -DWORK=dir [-DBUILD=what] [-DUPDATE=1]
#       [-DMODE=m] [-DEXTRA=arg] [-DDUMP=name] [-DWHAT=text] [-DTEST=name] [-DINSTR_ATSTART=no] [-DCOLLECT_ATSTART=no]
#       [-DCOMPUTE_CAPABILITY=95] -P this
foreach(v VALGRIND PROGRAM LIBCUDA LAUNCHES FIGURE WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_instructions: -D${v}=... is required")
  endif()
endforeach()
if(NOT DEFINED DUMP)
  set(DUMP "awaited launches")
endif()
if(NOT DEFINED TEST)
  set(TEST callgrind_awaited_op)
endif()
if(NOT DEFINED INSTR_ATSTART)
  set(INSTR_ATSTART yes)
endif()
if(NOT DEFINED COLLECT_ATSTART)
  set(COLLECT_ATSTART yes)
endif()
if(NOT DEFINED WHAT)
  set(WHAT "instructions (callgrind Ir) on the io thread per awaited launch, simulated driver, closed loop of \
${LAUNCHES} after 500 warm-up; the io thread makes its own passes in its window and its backoff (executor_backoff), \
the poller thread after them (tests/callgrind)")
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(ENV{CUASYNC_LIBCUDA} ${LIBCUDA})
set(ENV{FAKE_CUDA_DEVICES} 1)
if(DEFINED COMPUTE_CAPABILITY)  # 95: kernels the program compiles through the JIT come as PTX the simulator loads
  set(ENV{FAKE_CUDA_COMPUTE_CAPABILITY} ${COMPUTE_CAPABILITY})
  # A cache of this run's own, filled by a run outside valgrind first: NVRTC compiling under valgrind took minutes
  # (a C++ template with name expressions ran into the test's timeout), and the compile is not what is counted.
  set(ENV{CUASYNC_CACHE_DIR} ${WORK}/jit-cache)
  execute_process(COMMAND ${PROGRAM} ${MODE} 1 ${EXTRA} RESULT_VARIABLE warm_rc OUTPUT_VARIABLE warm_out
                  ERROR_VARIABLE warm_err TIMEOUT 120)
  if(NOT warm_rc EQUAL 0)
    message(FATAL_ERROR "check_instructions: ${PROGRAM} failed outside valgrind (${warm_rc}):\n${warm_out}\n${warm_err}")
  endif()
endif()
# --fair-sched: without it a thread spinning for another (the simulated driver's, the poller's) can hold valgrind's
# one lock for minutes: the typed C ABI loop ran into the timeout, 1.9 s with it.
execute_process(
  COMMAND ${VALGRIND} --tool=callgrind --fair-sched=yes --separate-threads=yes --collect-atstart=${COLLECT_ATSTART} --instr-atstart=${INSTR_ATSTART}
          --callgrind-out-file=${WORK}/callgrind.out ${PROGRAM} ${MODE} ${LAUNCHES} ${EXTRA}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 550)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_instructions: ${PROGRAM} under callgrind failed (${rc}):\n${out}\n${err}")
endif()
# The client request's dump: callgrind.out.<n>-01 for thread 1 (the main thread: for awaited launches the io thread,
# main runs io.run()).
file(GLOB dumps ${WORK}/callgrind.out.*-01)
set(ir "")
foreach(d IN LISTS dumps)
  file(STRINGS ${d} trigger REGEX "^desc: Trigger: Client Request: ${DUMP}$")
  if(trigger)
    file(STRINGS ${d} totals REGEX "^(summary|totals): [0-9]+")
    list(GET totals 0 line)
    string(REGEX REPLACE "^(summary|totals): ([0-9]+).*" "\\2" ir "${line}")
  endif()
endforeach()
if(ir STREQUAL "")
  message(FATAL_ERROR "check_instructions: no dump of the measured loop for thread 1 in ${WORK}:\n${err}")
endif()
math(EXPR per_op "${ir} / ${LAUNCHES}")
message(STATUS "callgrind: ${ir} instructions on thread 1 for ${LAUNCHES} ${DUMP}: ${per_op} each")
if(UPDATE)
  file(WRITE ${FIGURE} "{\n  \"what\": \"${WHAT}\",\n  \"build\": \"${BUILD}\",\n  \"launches\": ${LAUNCHES},\n  \
\"instructions_per_launch\": ${per_op},\n  \"limit\": \"10% above this fails CTest ${TEST}\"\n}\n")
  message(STATUS "callgrind: wrote ${FIGURE}")
  return()
endif()
file(READ ${FIGURE} json)
string(JSON committed GET "${json}" instructions_per_launch)
math(EXPR limit "${committed} + ${committed} / 10")
if(per_op GREATER limit)
  message(FATAL_ERROR "callgrind: ${per_op} instructions per launch (${DUMP}), more than 10% above the committed "
                      "${committed} (${FIGURE}); if the increase is meant, re-measure with -DUPDATE=1 and say why")
endif()
message(STATUS "callgrind: within 10% of the committed ${committed} per launch")
