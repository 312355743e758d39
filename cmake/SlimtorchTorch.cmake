# One LibTorch, whole: included by slimtorch's CMakeLists.txt and by its
# installed package config (slimtorchConfig.cmake), around find_package(Torch).
#
# TorchConfig.cmake looks each library up with
# find_library(<name>_LIBRARY <name> PATHS "${TORCH_INSTALL_PREFIX}/lib"),
# and its Caffe2 config with find_package(Caffe2 PATHS <its own folder>),
# both of which search the system's folders BEFORE that PATHS: on a machine
# with Debian's libtorch-dev, a build against a PyTorch wheel would link
# Debian's libtorch.so / libc10.so beside the wheel's other libraries and
# headers.
# slimtorch_pin_torch_libraries() finds the TorchConfig.cmake that
# find_package(Torch) is about to load (Torch_DIR, or a CMAKE_PREFIX_PATH
# entry) and sets each of those variables to the library in that LibTorch's
# own folder first; slimtorch_check_one_libtorch() then refuses a
# configuration whose LibTorch libraries still come from two places.

# The functions keep this file's policies wherever they are called from
# (the package config runs in another project's).
cmake_policy(PUSH)
cmake_policy(VERSION 3.18)

# The folder holding TorchConfig.cmake that the hints name, or "".
function(_slimtorch_torch_config_dir out)
  set(candidates)
  foreach(dir IN ITEMS "${Torch_DIR}" "$ENV{Torch_DIR}")
    if(dir)
      list(APPEND candidates "${dir}")
    endif()
  endforeach()
  set(prefixes ${CMAKE_PREFIX_PATH})
  if(DEFINED ENV{CMAKE_PREFIX_PATH})
    string(REPLACE ":" ";" env_prefixes "$ENV{CMAKE_PREFIX_PATH}")
    list(APPEND prefixes ${env_prefixes})
  endif()
  foreach(prefix IN LISTS prefixes)
    list(APPEND candidates "${prefix}" "${prefix}/Torch" "${prefix}/share/cmake/Torch"
         "${prefix}/lib/cmake/Torch")
  endforeach()
  foreach(dir IN LISTS candidates)
    if(EXISTS "${dir}/TorchConfig.cmake")
      get_filename_component(dir "${dir}" REALPATH)
      set(${out} "${dir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# The library folder of the LibTorch whose config is in `config_dir`: lib/
# beside share/ (PyTorch's wheels, LibTorch's zip), or the folder above
# cmake/ (Debian's multiarch /usr/lib/<triplet>/cmake/Torch).
function(_slimtorch_torch_library_dir config_dir out)
  foreach(dir IN ITEMS "${config_dir}/../../../lib" "${config_dir}/../..")
    get_filename_component(dir "${dir}" REALPATH)
    if(EXISTS "${dir}/libc10.so" OR EXISTS "${dir}/libc10.dylib")
      set(${out} "${dir}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

# Before find_package(Torch): sets SLIMTORCH_TORCH_LIBRARY_DIR (when the
# hints name a LibTorch) and pins TorchConfig's library variables to it.
macro(slimtorch_pin_torch_libraries)
  _slimtorch_torch_config_dir(_slimtorch_torch_cfg)
  set(SLIMTORCH_TORCH_LIBRARY_DIR "")
  if(_slimtorch_torch_cfg)
    _slimtorch_torch_library_dir("${_slimtorch_torch_cfg}" SLIMTORCH_TORCH_LIBRARY_DIR)
  endif()
  # TorchConfig loads its Caffe2 config (the imported targets torch,
  # torch_cpu, c10, ...) with find_package(Caffe2 PATHS <its own>), which
  # also searches the system first: pinned to its own likewise.
  if(_slimtorch_torch_cfg AND EXISTS "${_slimtorch_torch_cfg}/../Caffe2/Caffe2Config.cmake")
    get_filename_component(_slimtorch_caffe2 "${_slimtorch_torch_cfg}/../Caffe2" REALPATH)
    set(Caffe2_DIR "${_slimtorch_caffe2}" CACHE PATH
        "LibTorch's Caffe2 config (pinned by slimtorch)" FORCE)
  endif()
  if(SLIMTORCH_TORCH_LIBRARY_DIR)
    # <variable>=<library> as TorchConfig.cmake (LibTorch 1.13 to 2.x) names them.
    foreach(_slimtorch_pair IN ITEMS c10_LIBRARY=c10 torch_LIBRARY=torch
        torch_cpu_LIBRARY=torch_cpu torch_cuda_LIBRARY=torch_cuda
        c10_cuda_LIBRARY=c10_cuda C10_CUDA_LIBRARY=c10_cuda
        CAFFE2_NVRTC_LIBRARY=caffe2_nvrtc TORCH_LIBRARY=torch
        kineto_LIBRARY=kineto torch_xpu_LIBRARY=torch_xpu c10_xpu_LIBRARY=c10_xpu)
      string(REPLACE "=" ";" _slimtorch_pair "${_slimtorch_pair}")
      list(GET _slimtorch_pair 0 _slimtorch_var)
      list(GET _slimtorch_pair 1 _slimtorch_lib)
      set(_slimtorch_file "${SLIMTORCH_TORCH_LIBRARY_DIR}/lib${_slimtorch_lib}${CMAKE_SHARED_LIBRARY_SUFFIX}")
      if(EXISTS "${_slimtorch_file}")
        set(${_slimtorch_var} "${_slimtorch_file}" CACHE FILEPATH
            "LibTorch's ${_slimtorch_lib} library (pinned by slimtorch)" FORCE)
      endif()
    endforeach()
  endif()
endmacro()

# The files behind a list of link items: targets (their imported location
# and their own link interface, recursively) and paths.
function(_slimtorch_link_files out)
  set(files)
  set(seen)
  set(queue ${ARGN})
  while(queue)
    list(POP_FRONT queue item)
    if(item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    if(TARGET "${item}")
      get_target_property(imported "${item}" IMPORTED)
      if(imported)
        foreach(prop IN ITEMS IMPORTED_LOCATION IMPORTED_LOCATION_RELEASE
            IMPORTED_LOCATION_RELWITHDEBINFO IMPORTED_LOCATION_NOCONFIG)
          get_target_property(location "${item}" ${prop})
          if(location)
            list(APPEND files "${location}")
          endif()
        endforeach()
      endif()
      get_target_property(interface "${item}" INTERFACE_LINK_LIBRARIES)
      if(interface)
        list(APPEND queue ${interface})
      endif()
    elseif(item MATCHES "^-Wl,--whole-archive (.+) -Wl,--no-whole-archive$")
      list(APPEND files "${CMAKE_MATCH_1}")
    elseif(IS_ABSOLUTE "${item}")
      list(APPEND files "${item}")
    endif()
  endwhile()
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# After find_package(Torch): every LibTorch library (libtorch*, libc10*,
# libcaffe2*, libshm*) of TORCH_LIBRARIES from one folder, else a fatal error
# naming the libraries, their folders and the fix. Sets
# SLIMTORCH_TORCH_LIBRARY_DIR to that folder.
function(slimtorch_check_one_libtorch)
  _slimtorch_link_files(files ${TORCH_LIBRARIES})
  set(dirs)
  set(listing "")
  foreach(file IN LISTS files)
    get_filename_component(name "${file}" NAME)
    if(NOT name MATCHES "^lib(torch|c10|caffe2|shm)")
      continue()
    endif()
    get_filename_component(real "${file}" REALPATH)
    get_filename_component(dir "${real}" DIRECTORY)
    list(APPEND dirs "${dir}")
    string(APPEND listing "\n  ${name}: ${dir}")
  endforeach()
  list(REMOVE_DUPLICATES dirs)
  list(LENGTH dirs count)
  if(count EQUAL 0)
    message(FATAL_ERROR "slimtorch: no LibTorch library found in TORCH_LIBRARIES "
      "(${TORCH_LIBRARIES}) of the LibTorch at ${TORCH_INSTALL_PREFIX}")
  endif()
  set(expected "${SLIMTORCH_TORCH_LIBRARY_DIR}")
  if(NOT expected)
    list(GET dirs 0 expected)
  endif()
  if(count GREATER 1 OR NOT dirs STREQUAL expected)
    message(FATAL_ERROR "slimtorch: the LibTorch libraries come from two installs "
      "(the LibTorch being configured is ${TORCH_INSTALL_PREFIX}, libraries in "
      "${expected}):${listing}\n"
      "Mixing them crashes at run time. Fix: configure from an empty build "
      "folder with scripts/build.sh (it picks .venv-cuda/'s LibTorch when "
      "present, else Debian's), or pass -DTorch_DIR=<the LibTorch's "
      "share/cmake/Torch> and nothing else naming a LibTorch; if a cached "
      "variable above points elsewhere, delete CMakeCache.txt.")
  endif()
  set(SLIMTORCH_TORCH_LIBRARY_DIR "${expected}" PARENT_SCOPE)
endfunction()

cmake_policy(POP)
