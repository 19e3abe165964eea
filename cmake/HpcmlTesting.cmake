# Test registration helpers. Every test carries one label:
#   unit    - a gtest binary, no external services
#   mpi     - an MPI program run under mpirun with 2 and with 4 ranks
#   cluster - runs against the local Slurm cluster started by the
#             hpcml_cluster fixture (tests/cluster/hpcml-cluster)
# Tests that need hardware absent here (a GPU) exit 77 and print the reason;
# ctest reports them as skipped.
enable_testing()
include(GoogleTest)

set(HPCML_CLUSTER_SCRIPT ${PROJECT_SOURCE_DIR}/tests/cluster/hpcml-cluster)
set(HPCML_CLUSTER_DIR "/tmp/hpcml-cluster" CACHE PATH "State directory of the local test cluster")
set(HPCML_CLUSTER_PORT_BASE "16810" CACHE STRING "First of the 4 private ports of the local test cluster")
# What every cluster test and the fixture see: two build trees with different
# values run two independent clusters side by side.
set(HPCML_CLUSTER_ENV "HPCML_CLUSTER_DIR=${HPCML_CLUSTER_DIR};HPCML_PORT_BASE=${HPCML_CLUSTER_PORT_BASE};SLURM_CONF=${HPCML_CLUSTER_DIR}/etc/slurm.conf")

# hpcml_add_unit_test(<name> SOURCES ... [LIBS ...])
function(hpcml_add_unit_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main hpcml::flags)
  gtest_discover_tests(${name} PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
endfunction()

# hpcml_add_mpi_test(<name> SOURCES ... [LIBS ...] [RANKS 2 4] [ARGS ...])
# hpcml_add_mpi_test(<name> TARGET <program> [RANKS ...] [ARGS ...])
# Registers <name>_np<N> for each rank count (of the test program built from
# SOURCES, or of an existing TARGET), run under mpirun as root with
# one math thread per rank (2 cores here, and ctest runs two tests at once:
# more threads would fight).
function(hpcml_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT;TARGET" "SOURCES;LIBS;RANKS;ARGS" ${ARGN})
  if(NOT ARG_TARGET)
    set(ARG_TARGET ${name})
  endif()
  if(NOT ARG_RANKS)
    set(ARG_RANKS 2 4)
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(ARG_SOURCES)
    add_executable(${name} ${ARG_SOURCES})
    target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gmock MPI::MPI_CXX hpcml::flags)
  endif()
  foreach(np IN LISTS ARG_RANKS)
    add_test(NAME ${name}_np${np}
      COMMAND ${HPCML_MPIEXEC} --oversubscribe -n ${np} $<TARGET_FILE:${ARG_TARGET}> ${ARG_ARGS})
    set_tests_properties(${name}_np${np} PROPERTIES LABELS mpi TIMEOUT ${ARG_TIMEOUT}
      PROCESSORS ${np} SKIP_RETURN_CODE 77
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;OMPI_MCA_rmaps_base_oversubscribe=1;OMPI_MCA_btl_vader_single_copy_mechanism=none")
  endforeach()
endfunction()

# hpcml_add_cluster_test(<name> COMMAND ... [TIMEOUT s] [ENV ...])
# Runs against the shared local cluster; serialised with the other cluster
# tests because they share one node's CPUs and the accounting database.
function(hpcml_add_cluster_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "COMMAND;ENV" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${ARG_COMMAND})
  set_tests_properties(${name} PROPERTIES LABELS cluster TIMEOUT ${ARG_TIMEOUT}
    FIXTURES_REQUIRED hpcml_cluster RESOURCE_LOCK hpcml_cluster SKIP_RETURN_CODE 77
    ENVIRONMENT "${HPCML_CLUSTER_ENV};HPCML_BUILD_DIR=${PROJECT_BINARY_DIR};HPCML_SOURCE_DIR=${PROJECT_SOURCE_DIR};${ARG_ENV}")
endfunction()
