# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Runs an example for CTest: `cmake -DCOMMAND="prog|arg|..." [-DEXPECT=regex] [-DEXPECT_NO_GPU=regex]
# -P run_example.cmake`.
# Passes when it exits 0 and prints EXPECT, or exits 3 (the project's "no usable GPU" status) with a line
# "no GPU: <reason>" and what it could do without one (EXPECT_NO_GPU: the compile step, say). Anything else fails.
string(REPLACE "|" ";" COMMAND "${COMMAND}")  # the program and its arguments, joined by | in the -D value
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc STREQUAL "0")
  if(NOT "${EXPECT}" STREQUAL "" AND NOT out MATCHES "${EXPECT}")
    message(FATAL_ERROR "run_example: exit 0 but the output lacks /${EXPECT}/")
  endif()
  message("run_example: passed on a GPU")
elseif(rc STREQUAL "3")
  if(NOT "${out}${err}" MATCHES "no GPU: ")
    message(FATAL_ERROR "run_example: exit 3 without a 'no GPU: <reason>' line")
  endif()
  if(NOT "${EXPECT_NO_GPU}" STREQUAL "" AND NOT "${out}${err}" MATCHES "${EXPECT_NO_GPU}")
    message(FATAL_ERROR "run_example: no GPU, but the part that needs none did not run (/${EXPECT_NO_GPU}/)")
  endif()
  message("run_example: no GPU (exit 3): the part that needs none ran")
else()
  message(FATAL_ERROR "run_example: exit status ${rc}")
endif()
