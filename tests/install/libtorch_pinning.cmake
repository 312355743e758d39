# cmake/SlimtorchTorch.cmake on fake LibTorch trees (no LibTorch needed):
#  1. Torch_DIR of a wheel-like tree pins TorchConfig's library variables
#     and Caffe2_DIR to that tree, over whatever the system has;
#  2. so does a CMAKE_PREFIX_PATH entry of torch.utils.cmake_prefix_path's form;
#  3. slimtorch_check_one_libtorch refuses libraries from two folders, with
#     the libraries, their folders and the fix; accepts one folder.
#   cmake -DSOURCE_DIR=<source dir> -DWORK=<empty folder> -P libtorch_pinning.cmake
cmake_minimum_required(VERSION 3.18)
set(CMAKE_SHARED_LIBRARY_SUFFIX .so)
include(${SOURCE_DIR}/cmake/SlimtorchTorch.cmake)

function(expect_equal what got want)
  if(NOT got STREQUAL want)
    message(FATAL_ERROR "FAIL ${what}: '${got}', expected '${want}'")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK})
set(wheel ${WORK}/site-packages/torch)
file(MAKE_DIRECTORY ${wheel}/share/cmake/Torch ${wheel}/share/cmake/Caffe2 ${wheel}/lib
     ${WORK}/system)
file(TOUCH ${wheel}/share/cmake/Torch/TorchConfig.cmake
     ${wheel}/share/cmake/Caffe2/Caffe2Config.cmake)
foreach(lib c10 c10_cuda torch torch_cpu torch_cuda)
  file(TOUCH ${wheel}/lib/lib${lib}.so ${WORK}/system/lib${lib}.so)
endforeach()

# 1. Torch_DIR; the cache holds a stale value from another LibTorch first
# (a build folder configured before), which find_library would keep.
set(c10_LIBRARY ${WORK}/system/libc10.so CACHE FILEPATH "")
set(Caffe2_DIR ${WORK}/system CACHE PATH "")
set(Torch_DIR ${wheel}/share/cmake/Torch)
slimtorch_pin_torch_libraries()
expect_equal("library folder" "${SLIMTORCH_TORCH_LIBRARY_DIR}" "${wheel}/lib")
foreach(pair c10_LIBRARY=c10 TORCH_LIBRARY=torch torch_cpu_LIBRARY=torch_cpu
    torch_cuda_LIBRARY=torch_cuda C10_CUDA_LIBRARY=c10_cuda c10_cuda_LIBRARY=c10_cuda)
  string(REPLACE "=" ";" pair "${pair}")
  list(GET pair 0 var)
  list(GET pair 1 lib)
  expect_equal("${var}" "$CACHE{${var}}" "${wheel}/lib/lib${lib}.so")
  expect_equal("\${${var}}" "${${var}}" "${wheel}/lib/lib${lib}.so")
endforeach()
expect_equal("Caffe2_DIR" "$CACHE{Caffe2_DIR}" "${wheel}/share/cmake/Caffe2")
if(DEFINED CACHE{CAFFE2_NVRTC_LIBRARY})
  message(FATAL_ERROR "FAIL a library the LibTorch lacks was pinned: $CACHE{CAFFE2_NVRTC_LIBRARY}")
endif()

# 2. CMAKE_PREFIX_PATH as torch.utils.cmake_prefix_path gives it.
unset(Torch_DIR)
unset(SLIMTORCH_TORCH_LIBRARY_DIR)
set(CMAKE_PREFIX_PATH ${WORK}/elsewhere ${wheel}/share/cmake)
slimtorch_pin_torch_libraries()
expect_equal("library folder from CMAKE_PREFIX_PATH" "${SLIMTORCH_TORCH_LIBRARY_DIR}" "${wheel}/lib")

# 3. The check, in a child cmake (a refusal is a fatal error).
function(run_check name libraries out_rc out_text)
  file(WRITE ${WORK}/${name}.cmake "
set(CMAKE_SHARED_LIBRARY_SUFFIX .so)
include(${SOURCE_DIR}/cmake/SlimtorchTorch.cmake)
set(TORCH_INSTALL_PREFIX ${wheel})
set(SLIMTORCH_TORCH_LIBRARY_DIR ${wheel}/lib)
set(TORCH_LIBRARIES ${libraries})
slimtorch_check_one_libtorch()
message(\"accepted\")
")
  execute_process(COMMAND ${CMAKE_COMMAND} -P ${WORK}/${name}.cmake
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(${out_rc} ${rc} PARENT_SCOPE)
  set(${out_text} "${out}${err}" PARENT_SCOPE)
endfunction()
run_check(mixed "${wheel}/lib/libtorch.so;${WORK}/system/libc10.so" rc text)
if(rc EQUAL 0 OR NOT text MATCHES "come from two installs"
   OR NOT text MATCHES "libc10.so: ${WORK}/system"
   OR NOT text MATCHES "scripts/build.sh")
  message(FATAL_ERROR "FAIL a mix of two LibTorches was not refused as expected (exit ${rc}):\n${text}")
endif()
run_check(whole "${wheel}/lib/libtorch.so;-Wl,--whole-archive ${wheel}/lib/libtorch_cpu.so -Wl,--no-whole-archive;${wheel}/lib/libc10.so" rc text)
if(NOT rc EQUAL 0 OR NOT text MATCHES "accepted")
  message(FATAL_ERROR "FAIL one LibTorch's libraries were refused (exit ${rc}):\n${text}")
endif()
message("ok: pinned from Torch_DIR and CMAKE_PREFIX_PATH; a mix refused, one LibTorch accepted")
