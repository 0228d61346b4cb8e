# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Fails when any built executable or shared library records libcuda or libnvrtc as NEEDED: both must be loaded at
# run time only (DESIGN.md, decision 1). Run by CTest after the build: cmake -DBUILD_DIR=... -P this file.
file(GLOB_RECURSE candidates LIST_DIRECTORIES false "${BUILD_DIR}/*")
set(checked 0)
foreach(f IN LISTS candidates)
  # callgrind-*/ and other run folders: what tests running beside this one write and delete (a file gone between the
  # glob and the read failed this test under ctest -j).
  if(f MATCHES "/CMakeFiles/|/consumer-test/|/callgrind-[^/]*/|/Testing/|\\.(o|a|cmake|txt|log|json|md|S|cubin|ptx|fatbin)$"
     OR f MATCHES "callgrind\\.out" OR NOT EXISTS "${f}")
    continue()
  endif()
  file(READ "${f}" magic LIMIT 4 HEX)
  if(NOT magic STREQUAL "7f454c46")
    continue()  # not an ELF file
  endif()
  execute_process(COMMAND readelf -d "${f}" OUTPUT_VARIABLE dyn ERROR_QUIET RESULT_VARIABLE r)
  if(NOT r EQUAL 0 OR NOT dyn MATCHES "Dynamic section")
    continue()  # an ELF file without dynamic section (CUBINs, static objects)
  endif()
  math(EXPR checked "${checked} + 1")
  if(dyn MATCHES "NEEDED[^\n]*lib(cuda|nvrtc)")
    if(NOT f MATCHES "fake_libcuda")
      message(FATAL_ERROR "${f} links libcuda or libnvrtc at link time:\n${dyn}")
    endif()
  endif()
endforeach()
if(checked EQUAL 0)
  message(FATAL_ERROR "no ELF binaries found under ${BUILD_DIR}")
endif()
message(STATUS "checked ${checked} ELF files: none links libcuda or libnvrtc")
