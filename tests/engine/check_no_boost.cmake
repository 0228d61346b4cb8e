# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Fails when a file under DIR includes a Boost header.
file(GLOB_RECURSE files ${DIR}/*.hpp ${DIR}/*.cpp ${DIR}/CMakeLists.txt)
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "(#include[ \t]*[<\"]boost/)|(Boost::)")
  if(lines)
    message(FATAL_ERROR "${f} uses Boost: ${lines}")
  endif()
endforeach()
list(LENGTH files n)
get_filename_component(component ${DIR} NAME)
message(STATUS "${component}: ${n} files, no Boost")
