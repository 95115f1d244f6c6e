# cmake/cuda.cmake — the CUDA backend module, libkerac_cuda.so (src/backend/cuda/).
# Included at the end of the top-level CMakeLists.txt: include(cmake/cuda.cmake)
#
#   KERAC_CUDA=AUTO|ON|OFF   AUTO (default): build the module when CMake finds a CUDA
#                            compiler, cuDNN and cuBLAS; ON: fail when one is missing; OFF: never.
#   KERAC_CUDNN_ROOT         where cuDNN lives when it is not beside CUDA (a directory with
#                            include/cudnn.h and lib/libcudnn.so.9, e.g. a Python wheel's
#                            site-packages/nvidia/cudnn); KERAC_CUDNN_INCLUDE_DIR and
#                            KERAC_CUDNN_LIBRARY may also be given directly. Likewise
#                            KERAC_CUBLAS_ROOT / KERAC_CUBLAS_INCLUDE_DIR / KERAC_CUBLAS_LIBRARY.
#   CMAKE_CUDA_ARCHITECTURES default 80-real;90-real;100-real;120-real;90-virtual (the real
#                            ones this nvcc knows; 90-virtual is PTX that newer GPUs compile).
#   KERAC_CUDA_RUNPATH       AUTO (default): the module's RUNPATH holds the cuDNN / cuBLAS
#                            directories that the system loader does not already search
#                            (ldconfig -p); ON: always; OFF: never (use LD_LIBRARY_PATH).
#
# The module links the CUDA runtime statically: its only runtime dependencies are
# libcudnn.so.9 and libcublas.so.N (+ libcublasLt), and libcuda.so.1, which the runtime
# loads itself, so a machine without the driver gets a clear error from the module's
# initialisation instead of a module that cannot load. It is built next to libkerac in the
# build tree and installed beside it, where kc_backend_open looks for it.
# The versions and architectures it was built with go to <build>/generated/kerac_cuda_build.h.

set(KERAC_CUDA AUTO CACHE STRING "Build the CUDA backend module libkerac_cuda.so: AUTO, ON or OFF")
set_property(CACHE KERAC_CUDA PROPERTY STRINGS AUTO ON OFF)
set(KERAC_CUDA_RUNPATH AUTO CACHE STRING "RUNPATH of libkerac_cuda.so: AUTO, ON or OFF")
set_property(CACHE KERAC_CUDA_RUNPATH PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${KERAC_CUDA}" _kc_cuda_mode)
set(KERAC_CUDA_BUILT OFF)

if(_kc_cuda_mode STREQUAL "OFF")
  message(STATUS "kerac: CUDA backend not built (KERAC_CUDA=OFF)")
  return()
endif()
if(NOT _kc_cuda_mode MATCHES "^(AUTO|ON)$")
  message(FATAL_ERROR "KERAC_CUDA='${KERAC_CUDA}' must be AUTO, ON or OFF")
endif()

# A missing piece: an error with KERAC_CUDA=ON, a note (and no module) with AUTO.
macro(kerac_cuda_missing why)
  if(_kc_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "KERAC_CUDA=ON but ${why}")
  endif()
  message(STATUS "kerac: CUDA backend not built: ${why} (KERAC_CUDA=AUTO)")
  return()
endmacro()

include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  kerac_cuda_missing("no CUDA compiler (nvcc) was found; put it on PATH or set CUDACXX")
endif()
get_filename_component(_kc_cuda_bin "${CMAKE_CUDA_COMPILER}" DIRECTORY)
get_filename_component(_kc_cuda_root "${_kc_cuda_bin}" DIRECTORY)

# cuDNN and cuBLAS: beside the toolkit, or where the caller says
find_path(KERAC_CUDNN_INCLUDE_DIR cudnn.h
  HINTS ${KERAC_CUDNN_ROOT}/include $ENV{CUDNN_ROOT}/include ${_kc_cuda_root}/include)
find_library(KERAC_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
  HINTS ${KERAC_CUDNN_ROOT}/lib ${KERAC_CUDNN_ROOT}/lib64 $ENV{CUDNN_ROOT}/lib $ENV{CUDNN_ROOT}/lib64
        ${_kc_cuda_root}/lib64 ${_kc_cuda_root}/lib)
find_path(KERAC_CUBLAS_INCLUDE_DIR cublas_v2.h
  HINTS ${KERAC_CUBLAS_ROOT}/include ${_kc_cuda_root}/include ${_kc_cuda_root}/targets/x86_64-linux/include)
find_library(KERAC_CUBLAS_LIBRARY NAMES cublas libcublas.so.13 libcublas.so.12
  HINTS ${KERAC_CUBLAS_ROOT}/lib ${KERAC_CUBLAS_ROOT}/lib64 ${_kc_cuda_root}/lib64 ${_kc_cuda_root}/lib
        ${_kc_cuda_root}/targets/x86_64-linux/lib)
if(NOT KERAC_CUDNN_INCLUDE_DIR OR NOT KERAC_CUDNN_LIBRARY)
  kerac_cuda_missing("cuDNN was not found (cudnn.h: ${KERAC_CUDNN_INCLUDE_DIR}, libcudnn: ${KERAC_CUDNN_LIBRARY}); set KERAC_CUDNN_ROOT")
endif()
if(NOT KERAC_CUBLAS_INCLUDE_DIR OR NOT KERAC_CUBLAS_LIBRARY)
  kerac_cuda_missing("cuBLAS was not found (cublas_v2.h: ${KERAC_CUBLAS_INCLUDE_DIR}, libcublas: ${KERAC_CUBLAS_LIBRARY}); set KERAC_CUBLAS_ROOT")
endif()

# versions from the headers compiled against
file(STRINGS "${KERAC_CUDNN_INCLUDE_DIR}/cudnn_version.h" _kc_dnn REGEX "#define CUDNN_(MAJOR|MINOR|PATCHLEVEL) ")
string(REGEX REPLACE ".*CUDNN_MAJOR ([0-9]+).*" "\\1" _kc_dnn_major "${_kc_dnn}")
string(REGEX REPLACE ".*CUDNN_MINOR ([0-9]+).*" "\\1" _kc_dnn_minor "${_kc_dnn}")
string(REGEX REPLACE ".*CUDNN_PATCHLEVEL ([0-9]+).*" "\\1" _kc_dnn_patch "${_kc_dnn}")
set(KERAC_CUDNN_VERSION "${_kc_dnn_major}.${_kc_dnn_minor}.${_kc_dnn_patch}")
file(STRINGS "${KERAC_CUBLAS_INCLUDE_DIR}/cublas_api.h" _kc_blas REGEX "#define CUBLAS_VER_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*CUBLAS_VER_MAJOR ([0-9]+).*" "\\1" _kc_blas_major "${_kc_blas}")
string(REGEX REPLACE ".*CUBLAS_VER_MINOR ([0-9]+).*" "\\1" _kc_blas_minor "${_kc_blas}")
string(REGEX REPLACE ".*CUBLAS_VER_PATCH ([0-9]+).*" "\\1" _kc_blas_patch "${_kc_blas}")
set(KERAC_CUBLAS_VERSION "${_kc_blas_major}.${_kc_blas_minor}.${_kc_blas_patch}")
if(NOT _kc_dnn_major STREQUAL "9")
  kerac_cuda_missing("cuDNN ${KERAC_CUDNN_VERSION} at ${KERAC_CUDNN_INCLUDE_DIR} is not cuDNN 9")
endif()

# architectures: the real ones this nvcc knows, and PTX for newer GPUs
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --list-gpu-code OUTPUT_VARIABLE _kc_codes ERROR_QUIET)
  set(_kc_archs 80-real 90-real)
  foreach(_a 100 120)
    if(_kc_codes MATCHES "sm_${_a}[^0-9]")
      list(APPEND _kc_archs ${_a}-real)
    endif()
  endforeach()
  list(APPEND _kc_archs 90-virtual)
  set(CMAKE_CUDA_ARCHITECTURES "${_kc_archs}" CACHE STRING "GPU architectures of libkerac_cuda.so")
endif()
enable_language(CUDA)
find_package(Threads REQUIRED)

# the CUDA runtime, statically (see above); a toolkit without libcudart_static.a gets the
# shared one, and the module then also needs libcudart.so at run time
find_library(KERAC_CUDART_STATIC cudart_static
  HINTS ${_kc_cuda_root}/lib64 ${_kc_cuda_root}/lib ${_kc_cuda_root}/targets/x86_64-linux/lib NO_DEFAULT_PATH)
if(KERAC_CUDART_STATIC)
  set(_kc_cudart Static)
else()
  set(_kc_cudart Shared)
  message(WARNING "kerac: no libcudart_static.a beside ${CMAKE_CUDA_COMPILER}: libkerac_cuda.so links the shared "
                  "CUDA runtime, so a machine without it cannot load the module (instead of reporting 'no driver')")
endif()

set(_kc_min_cc 1000)
foreach(_a ${CMAKE_CUDA_ARCHITECTURES})
  string(REGEX MATCH "^[0-9]+" _n "${_a}")
  if(_n AND _n LESS _kc_min_cc)
    set(_kc_min_cc ${_n})
  endif()
endforeach()
string(REPLACE ";" " " _kc_arch_text "${CMAKE_CUDA_ARCHITECTURES}")
set(KERAC_CUDA_TOOLKIT_VERSION "${CMAKE_CUDA_COMPILER_VERSION}")
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/generated/kerac_cuda_build.h CONTENT [[
/* kerac_cuda_build.h — generated by cmake/cuda.cmake: what libkerac_cuda.so was built with. */
#ifndef KERAC_CUDA_BUILD_H
#define KERAC_CUDA_BUILD_H
#define KC_CUDA_BUILD_KERAC_VERSION "@PROJECT_VERSION@"
#define KC_CUDA_BUILD_CUDA_VERSION "@KERAC_CUDA_TOOLKIT_VERSION@"
#define KC_CUDA_BUILD_CUDNN_VERSION "@KERAC_CUDNN_VERSION@"
#define KC_CUDA_BUILD_CUBLAS_VERSION "@KERAC_CUBLAS_VERSION@"
#define KC_CUDA_BUILD_ARCHS "@_kc_arch_text@"
#define KC_CUDA_BUILD_MIN_CC @_kc_min_cc@
#endif
]] @ONLY)

# the module's RUNPATH: directories of cuDNN / cuBLAS that the loader would not search
set(_kc_runpath "")
string(TOUPPER "${KERAC_CUDA_RUNPATH}" _kc_rp_mode)
if(NOT _kc_rp_mode STREQUAL "OFF")
  set(_kc_ldcache "")
  if(_kc_rp_mode STREQUAL "AUTO")
    find_program(_kc_ldconfig ldconfig PATHS /sbin /usr/sbin)
    if(_kc_ldconfig)
      execute_process(COMMAND ${_kc_ldconfig} -p OUTPUT_VARIABLE _kc_ldcache ERROR_QUIET)
    endif()
  endif()
  foreach(_lib ${KERAC_CUDNN_LIBRARY} ${KERAC_CUBLAS_LIBRARY})
    get_filename_component(_real "${_lib}" REALPATH)
    get_filename_component(_dir "${_lib}" DIRECTORY)
    get_filename_component(_name "${_lib}" NAME)
    string(REGEX REPLACE "\\.so.*$" "" _stem "${_name}")
    if(_kc_rp_mode STREQUAL "ON" OR NOT _kc_ldcache MATCHES "${_stem}\\.so\\.[0-9]+ ")
      list(APPEND _kc_runpath "${_dir}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES _kc_runpath)
endif()

file(GLOB KERAC_CUDA_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.c ${CMAKE_SOURCE_DIR}/src/backend/cuda/*.cu)
add_library(kerac_cuda MODULE ${KERAC_CUDA_SOURCES})
set_target_properties(kerac_cuda PROPERTIES
  PREFIX "lib" OUTPUT_NAME kerac_cuda
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
  C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
  CUDA_RUNTIME_LIBRARY ${_kc_cudart}
  CUDA_SEPARABLE_COMPILATION OFF
  BUILD_WITH_INSTALL_RPATH ON
  INSTALL_RPATH "${_kc_runpath}")
target_include_directories(kerac_cuda PRIVATE
  ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src ${CMAKE_BINARY_DIR}/generated
  ${KERAC_CUDNN_INCLUDE_DIR} ${KERAC_CUBLAS_INCLUDE_DIR} ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
target_compile_options(kerac_cuda PRIVATE
  $<$<COMPILE_LANGUAGE:C>:${KERAC_WARN} -O2>
  $<$<COMPILE_LANGUAGE:CUDA>:-O3>)
# cuDNN first: when it is missing, that is the library the loader names
target_link_libraries(kerac_cuda PRIVATE ${KERAC_CUDNN_LIBRARY} ${KERAC_CUBLAS_LIBRARY} Threads::Threads ${CMAKE_DL_LIBS} m)
target_link_options(kerac_cuda PRIVATE -Wl,--no-undefined)
install(TARGETS kerac_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
set(KERAC_CUDA_BUILT ON)
message(STATUS "kerac: CUDA backend libkerac_cuda.so: CUDA ${KERAC_CUDA_TOOLKIT_VERSION}, cuDNN ${KERAC_CUDNN_VERSION} "
               "(${KERAC_CUDNN_LIBRARY}), cuBLAS ${KERAC_CUBLAS_VERSION}, architectures ${_kc_arch_text}, "
               "RUNPATH '${_kc_runpath}'")

# the kerac side of the GPU benchmark (bench/gpu/), beside the module so that it finds it
if(EXISTS ${CMAKE_SOURCE_DIR}/bench/gpu/bench_gpu.c)
  add_executable(bench_gpu ${CMAKE_SOURCE_DIR}/bench/gpu/bench_gpu.c)
  target_compile_options(bench_gpu PRIVATE ${KERAC_WARN} -O2)
  target_link_libraries(bench_gpu PRIVATE kerac_static m)
  set_target_properties(bench_gpu PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}
                        BUILD_RPATH ${KERAC_OPENBLAS_DIR})
endif()
