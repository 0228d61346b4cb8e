# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Helpers shared by every component's CMakeLists.txt.

# The CUDA toolkit's headers (cuda.h, nvrtc.h, nvtx3). Only headers: libcuda and libnvrtc are loaded at run time.
function(cuasync_find_cuda_headers)
  find_path(CUASYNC_CUDA_INCLUDE_DIR cuda.h
    HINTS ENV CUDA_HOME ENV CUDA_PATH /usr/local/cuda
    PATH_SUFFIXES include
    DOC "Directory holding the CUDA toolkit's cuda.h")
  if(NOT CUASYNC_CUDA_INCLUDE_DIR)
    message(FATAL_ERROR "cuda.h not found: install the CUDA 13 toolkit headers or set CUDA_HOME")
  endif()
  message(STATUS "cuasync: CUDA headers in ${CUASYNC_CUDA_INCLUDE_DIR}")
  if(NOT TARGET cuasync_cuda_headers)
    add_library(cuasync_cuda_headers INTERFACE)
    add_library(cuasync::cuda_headers ALIAS cuasync_cuda_headers)
    set_target_properties(cuasync_cuda_headers PROPERTIES EXPORT_NAME cuda_headers)
    # The build's own path only: an installed package must not carry it (another machine keeps the toolkit
    # elsewhere). cuasyncConfig.cmake finds the headers where the consumer is (FindCUDAToolkit) and adds them.
    target_include_directories(cuasync_cuda_headers SYSTEM INTERFACE $<BUILD_INTERFACE:${CUASYNC_CUDA_INCLUDE_DIR}>)
    install(TARGETS cuasync_cuda_headers EXPORT cuasyncTargets)
  endif()
endfunction()

# cuasync_add_component(<name> SOURCES ... DEPENDS ...): the library target cuasync::<name> with its public
# include/ folder, installed and exported.
function(cuasync_add_component name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPENDS;PRIVATE_DEPENDS" ${ARGN})
  add_library(cuasync_${name} STATIC ${ARG_SOURCES})
  add_library(cuasync::${name} ALIAS cuasync_${name})
  set_target_properties(cuasync_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME cuasync_${name})
  target_include_directories(cuasync_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(cuasync_${name} PUBLIC cxx_std_20)
  target_compile_options(cuasync_${name} PRIVATE -Wall -Wextra -Wpedantic)
  target_link_libraries(cuasync_${name} PUBLIC ${ARG_DEPENDS} PRIVATE ${ARG_PRIVATE_DEPENDS})
  install(TARGETS cuasync_${name} EXPORT cuasyncTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set_property(GLOBAL APPEND PROPERTY CUASYNC_COMPONENTS ${name})  # for cuasyncConfig.cmake's COMPONENTS
endfunction()

# cuasync_embed_binary(<target> <symbol> <file>): links <file>'s bytes into <target> as
#   extern "C" const unsigned char <symbol>[]; extern "C" const unsigned char <symbol>_end[];
# so binaries carry their kernel images and run from any folder (the GPU machine has another path).
function(cuasync_embed_binary target symbol file)
  set(asm ${CMAKE_CURRENT_BINARY_DIR}/embed_${symbol}.S)
  file(WRITE ${asm}
    ".section .rodata\n.balign 16\n.global ${symbol}\n${symbol}:\n.incbin \"${file}\"\n"
    ".global ${symbol}_end\n${symbol}_end:\n.byte 0\n.section .note.GNU-stack,\"\",@progbits\n")
  set_source_files_properties(${asm} PROPERTIES OBJECT_DEPENDS ${file})
  target_sources(${target} PRIVATE ${asm})
endfunction()
