# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# The installed package as a user meets it. Installs the build tree into PREFIX-staging, then moves it to PREFIX (a
# relocated install: nothing may point back at where it was installed, at the build or at this machine's CUDA), and
#   - checks the layout: libcuasync.so.<version> with its SONAME link libcuasync.so.1 and dev link, SONAME and version
#     node (readelf -d, nm), cuasync.pc, the docs, the Python package and the JAX FFI source;
#   - builds and runs the consumer project (cuasync::driver, and a coroutine on cuasync::cuasync / async_io);
#   - builds a C program with `pkg-config --cflags --libs cuasync` and runs it on the library the .pc names;
#   - imports the installed Python package, which must find the installed library by itself;
#   - asks for components that are there and ones that are not: the failure names the component and the reason.
# Arguments (-D): BUILD_DIR PREFIX CONSUMER_SRC CONSUMER_BUILD SANITIZE C_COMPILER VERSION LIBDIR INCLUDEDIR DOCDIR
# PYTHONDIR CUDA_INCLUDE_DIR SOURCE_DIR HAS_ASYNC_IO PYTHON.
set(staging ${PREFIX}-staging)
file(REMOVE_RECURSE ${PREFIX} ${staging} ${CONSUMER_BUILD})
unset(ENV{CUASYNC_LIBRARY})
set(ENV{CUASYNC_CACHE_DIR} ${CONSUMER_BUILD}/kernel-cache)  # the compile of the async_io consumer caches here

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(r)
    message(FATAL_ERROR "${what} failed (${r}):\n${out}\n${err}")
  endif()
  set(out "${out}${err}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${staging})
file(RENAME ${staging} ${PREFIX})
message(STATUS "installed into ${staging}, moved to ${PREFIX}")

# The layout.
string(REGEX MATCH "^[0-9]+" major ${VERSION})
set(lib ${PREFIX}/${LIBDIR})
foreach(f ${lib}/libcuasync.so.${VERSION} ${lib}/libcuasync.so.${major} ${lib}/libcuasync.so ${lib}/pkgconfig/cuasync.pc
          ${lib}/cmake/cuasync/cuasyncConfig.cmake ${PREFIX}/${INCLUDEDIR}/cuasync/cuasync.h
          ${PREFIX}/${DOCDIR}/tracing.md ${PREFIX}/${DOCDIR}/architecture.md ${PREFIX}/${DOCDIR}/README.md
          ${PREFIX}/${PYTHONDIR}/cuasync/__init__.py ${PREFIX}/${PYTHONDIR}/cuasync/_installed.py
          ${PREFIX}/${PYTHONDIR}/cuasync/_ffi/cuasync_xla_ffi.cpp ${PREFIX}/${PYTHONDIR}/cuasync/_ffi/cuasync_torch_ops.cpp
          ${PREFIX}/${PYTHONDIR}/cuasync/_ffi/include/cuasync/cuasync.h)
  if(NOT EXISTS ${f})
    message(FATAL_ERROR "the install has no ${f}")
  endif()
endforeach()
# The compile farm's worker, beside the library (where libcuasync.so and the Python package look for it), runnable
# from the moved install: started by hand it says what it is for and exits 2.
if(EXISTS ${BUILD_DIR}/plugins/cuasync-jit-worker)
  if(NOT EXISTS ${lib}/cuasync-jit-worker)
    message(FATAL_ERROR "the install has no ${lib}/cuasync-jit-worker")
  endif()
  execute_process(COMMAND ${lib}/cuasync-jit-worker RESULT_VARIABLE r ERROR_VARIABLE err)
  if(NOT r EQUAL 2 OR NOT err MATCHES "started by cuasync's compile farm")
    message(FATAL_ERROR "the installed cuasync-jit-worker did not run (${r}): ${err}")
  endif()
  set(ENV{CUASYNC_JIT_WORKER} ${lib}/cuasync-jit-worker)  # the async_io consumer's farm runs it
endif()
if(IS_SYMLINK ${lib}/libcuasync.so.${VERSION} OR NOT IS_SYMLINK ${lib}/libcuasync.so.${major}
   OR NOT IS_SYMLINK ${lib}/libcuasync.so)
  message(FATAL_ERROR "libcuasync.so.${VERSION} must be the file, libcuasync.so.${major} and libcuasync.so links")
endif()
run("the exports and SONAME check" ${CMAKE_COMMAND} -DLIB=${lib}/libcuasync.so.${major} -DSONAME=libcuasync.so.${major}
    -P ${SOURCE_DIR}/tests/plugins/check_exports.cmake)
message(STATUS "${out}")
# Nothing installed that a consumer reads names the staging prefix, the build or this machine's CUDA headers.
file(GLOB_RECURSE config_files ${lib}/cmake/cuasync/*.cmake ${lib}/pkgconfig/*.pc ${PREFIX}/${PYTHONDIR}/cuasync/_installed.py)
foreach(f ${config_files})
  file(READ ${f} text)
  foreach(path ${staging} ${BUILD_DIR} ${SOURCE_DIR} ${CUDA_INCLUDE_DIR})
    string(FIND "${text}" "${path}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${f} names ${path}: the install is not relocatable")
    endif()
  endforeach()
endforeach()

# A sanitizer build's libraries need the consumers built with the same sanitizer.
set(flags "")
if(SANITIZE)
  set(flags "-fsanitize=${SANITIZE}")
endif()

# The CMake consumer against the moved prefix.
run("configuring the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD} -DCMAKE_PREFIX_PATH=${PREFIX}
    "-DCMAKE_CXX_FLAGS=${flags}" "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
run("building the consumer" ${CMAKE_COMMAND} --build ${CONSUMER_BUILD})
run("the driver consumer" ${CONSUMER_BUILD}/consumer)
message(STATUS "${out}")
if(NOT out MATCHES "consumer: ")
  message(FATAL_ERROR "the consumer did not run")
endif()
run("the async_io consumer" ${CONSUMER_BUILD}/consumer_async_io)
message(STATUS "${out}")
if(NOT out MATCHES "consumer_async_io: passed")
  message(FATAL_ERROR "the async_io consumer did not pass")
endif()

# The C ABI consumer through pkg-config alone.
find_program(PKG_CONFIG NAMES pkg-config pkgconf REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${lib}/pkgconfig)
run("pkg-config --cflags --libs cuasync" ${PKG_CONFIG} --cflags --libs cuasync)
string(STRIP "${out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("pkg-config --variable=library cuasync" ${PKG_CONFIG} --variable=library cuasync)
string(STRIP "${out}" pc_library)
message(STATUS "pkg-config: ${pc_flags}; library ${pc_library}")
file(REAL_PATH ${pc_library} pc_library_real)
file(REAL_PATH ${lib}/libcuasync.so.${major} installed_real)
if(NOT pc_library_real STREQUAL installed_real)
  message(FATAL_ERROR "cuasync.pc's library is ${pc_library}, not the moved install's ${lib}/libcuasync.so.${major}")
endif()
separate_arguments(c_flags UNIX_COMMAND "${flags}")
run("compiling the C consumer" ${C_COMPILER} -std=c11 -Wall -Wextra -Werror ${c_flags}
    ${CONSUMER_SRC}/c_abi_consumer.c -o ${CONSUMER_BUILD}/consumer_c_abi ${pc_flags})
run("the C ABI consumer" ${CONSUMER_BUILD}/consumer_c_abi ${pc_library})
message(STATUS "${out}")
if(NOT out MATCHES "consumer_c_abi: passed")
  message(FATAL_ERROR "the C ABI consumer did not pass")
endif()

# The Python package as cmake --install left it finds the installed library (not the build's) by itself.
if(PYTHON AND NOT SANITIZE)
  set(ENV{PYTHONPATH} ${PREFIX}/${PYTHONDIR})
  run("importing the installed Python package" ${PYTHON} -c
      "import cuasync\nprint(cuasync.__file__)\nprint(cuasync.library_path())\nprint(cuasync.__version__)\nfrom cuasync import _fastpath\nf = _fastpath.get()\nprint(f.__file__ if f else 'no fast path')")
  message(STATUS "${out}")
  if(NOT out MATCHES "${PREFIX}/${PYTHONDIR}/cuasync/__init__.py" OR NOT out MATCHES "${lib}/libcuasync.so.${major}")
    message(FATAL_ERROR "the installed Python package did not load the installed library")
  endif()
  # The compiled fast path, where the build has it: installed in the package and loaded from there.
  if(EXISTS ${BUILD_DIR}/plugins/_fast.abi3.so AND NOT out MATCHES "${PREFIX}/${PYTHONDIR}/cuasync/_fast.abi3.so")
    message(FATAL_ERROR "the installed Python package did not load its cuasync._fast")
  endif()
  unset(ENV{PYTHONPATH})
endif()

# Components: there, unknown, and missing a dependency (Boost hidden from find_package).
function(components want expect_ok expect_text)
  string(MD5 dir "${want} ${ARGN}")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC}/components -B ${CONSUMER_BUILD}/components-${dir}
                  -DCMAKE_PREFIX_PATH=${PREFIX} -DWANT=${want} ${ARGN}
                  RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect_ok AND r)
    message(FATAL_ERROR "COMPONENTS ${want} ${ARGN} failed:\n${out}\n${err}")
  elseif(NOT expect_ok AND NOT r)
    message(FATAL_ERROR "COMPONENTS ${want} ${ARGN} did not fail:\n${out}")
  endif()
  string(REGEX REPLACE "[ \n]+" " " text "${out}${err}")  # CMake wraps messages
  if(NOT text MATCHES "${expect_text}")
    message(FATAL_ERROR "COMPONENTS ${want} ${ARGN}: no '${expect_text}' in:\n${out}\n${err}")
  endif()
  message(STATUS "COMPONENTS ${want} ${ARGN}: ${expect_text}")
endfunction()
components(runtime TRUE "cuasync::cuasync links .*cuasync::runtime")
components(nosuch FALSE "component 'nosuch': there is no such component")
if(HAS_ASYNC_IO)
  components(async_io FALSE "component 'async_io': its headers include Boost.Asio, and Boost [0-9.]+ or newer was not found"
             -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON)
  components(runtime TRUE "cuasync::cuasync links .*cuasync::runtime" -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON)
endif()
