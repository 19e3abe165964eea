# Every third-party dependency is found here, once. All come from Debian
# packages installed by scripts/install-deps.sh; a missing one is a hard error
# naming that script, except the CUDA toolkit, which is optional.
set(_hpcml_hint "run scripts/install-deps.sh as root")

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(BLAS REQUIRED)
# oneDNN: the CPU trainer's GEMMs (docs/trainer.md says why); its Debian
# build threads with GNU OpenMP, which the trainer's loops share. Found by
# header and library, not by dnnl-config.cmake: that file requires OpenCL,
# which libdnnl-dev only recommends and a CPU build never uses.
find_path(HPCML_DNNL_INCLUDE oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(HPCML_DNNL_LIBRARY dnnl REQUIRED)
add_library(hpcml::dnnl INTERFACE IMPORTED)
target_include_directories(hpcml::dnnl INTERFACE ${HPCML_DNNL_INCLUDE})
target_link_libraries(hpcml::dnnl INTERFACE ${HPCML_DNNL_LIBRARY})
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Boost REQUIRED)
find_package(pugixml REQUIRED)

# A pkg-config module, as PkgConfig::<prefix>; a missing one names its
# Debian package (pkg-config's own message goes to stdout, which
# scripts/build.sh does not show).
macro(hpcml_pkg_module prefix module package)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR
      "pkg-config module '${module}' not found (Debian package ${package}): ${_hpcml_hint}")
  endif()
endmacro()
hpcml_pkg_module(TOMLPP tomlplusplus libtomlplusplus-dev)
hpcml_pkg_module(HWLOC hwloc libhwloc-dev)
hpcml_pkg_module(XXHASH libxxhash libxxhash-dev)
hpcml_pkg_module(NETTLE nettle nettle-dev)

# libslurm ships no pkg-config file on Debian.
find_path(HPCML_SLURM_INCLUDE slurm/spank.h REQUIRED)
find_library(HPCML_SLURM_LIBRARY slurm REQUIRED)
add_library(hpcml::slurm INTERFACE IMPORTED)
target_include_directories(hpcml::slurm INTERFACE ${HPCML_SLURM_INCLUDE})
target_link_libraries(hpcml::slurm INTERFACE ${HPCML_SLURM_LIBRARY})

find_program(HPCML_MPIEXEC NAMES mpirun mpiexec REQUIRED)
# Man pages (man/): help2man from each command's --help, pandoc from docs/.
find_program(HPCML_HELP2MAN help2man)
find_program(HPCML_PANDOC pandoc)
if(NOT HPCML_HELP2MAN OR NOT HPCML_PANDOC)
  message(FATAL_ERROR "help2man and pandoc make the man pages: ${_hpcml_hint}")
endif()
find_program(HPCML_SBATCH sbatch REQUIRED)

# HDF5 as one imported target.
if(NOT TARGET hpcml::hdf5)
  add_library(hpcml::hdf5 INTERFACE IMPORTED)
  target_include_directories(hpcml::hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(hpcml::hdf5 INTERFACE ${HDF5_C_LIBRARIES})
  target_compile_definitions(hpcml::hdf5 INTERFACE ${HDF5_DEFINITIONS})
endif()

# The CUDA toolkit is optional: found -> CUDA/NCCL targets are built.
set(HPCML_HAVE_CUDA OFF)
if(HPCML_ENABLE_CUDA)
  if(NOT DEFINED CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
    set(CUDAToolkit_ROOT /usr/local/cuda)
  endif()
  # Debian's CMake 3.25 FindCUDAToolkit sets a property on CUDA::nvToolsExt
  # without checking that the target exists, and CUDA 13 has no such library:
  # configure fails. The property is only set for projects that require
  # CMake 3.25 or later, so the search runs as for 3.24 (fixed in CMake 3.26).
  set(_hpcml_min_version ${CMAKE_MINIMUM_REQUIRED_VERSION})
  set(CMAKE_MINIMUM_REQUIRED_VERSION 3.24)
  find_package(CUDAToolkit QUIET)
  set(CMAKE_MINIMUM_REQUIRED_VERSION ${_hpcml_min_version})
  if(CUDAToolkit_FOUND)
    find_library(HPCML_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_ROOT}/lib64)
    find_path(HPCML_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
    if(HPCML_NCCL_LIBRARY AND HPCML_NCCL_INCLUDE)
      set(HPCML_HAVE_CUDA ON)
      add_library(hpcml::nccl INTERFACE IMPORTED)
      target_include_directories(hpcml::nccl INTERFACE ${HPCML_NCCL_INCLUDE})
      target_link_libraries(hpcml::nccl INTERFACE ${HPCML_NCCL_LIBRARY})
      message(STATUS "hpcml: CUDA ${CUDAToolkit_VERSION} and NCCL found: building the CUDA backend")
    else()
      message(STATUS "hpcml: CUDA toolkit found but NCCL is missing: skipping the CUDA backend")
    endif()
  else()
    message(STATUS "hpcml: no CUDA toolkit found (looked in /usr/local/cuda and PATH): skipping the CUDA backend")
  endif()
else()
  message(STATUS "hpcml: HPCML_ENABLE_CUDA=OFF: skipping the CUDA backend")
endif()
