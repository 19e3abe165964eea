# libFuzzer targets: every parser of outside input has one (docs/architecture.md).
#
# hpcml_add_fuzzer(<name> SOURCES <fuzzer.cpp> <sources under test>...
#                  SEEDS <dir>... [INCLUDES <dir>...] [LIBS -l<lib>...])
#
# The product build is g++; libFuzzer needs clang, so clang++ compiles the
# fuzzer and the sources it tests in one command (ASan + UBSan + libFuzzer,
# target <name>_build, part of ALL), and ctest runs test <name> (labels unit
# and fuzz) for 10 s from the seed directories. New inputs go to the build's
# fuzz/corpus-<name>; a crash leaves its input in the build's fuzz/.
# fmt and toml++ are Debian's shared libraries: our code is instrumented, theirs is not.
find_program(HPCML_FUZZ_CXX NAMES clang++ clang++-14 REQUIRED)
set(HPCML_FUZZ_SHIM ${CMAKE_CURRENT_LIST_DIR}/fuzz/source_location_shim.hpp)

function(hpcml_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;SEEDS;INCLUDES;LIBS" ${ARGN})
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/fuzz)
  set(sources)
  foreach(s IN LISTS ARG_SOURCES)
    get_filename_component(abs ${s} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND sources ${abs})
  endforeach()
  set(includes ${ARG_INCLUDES} ${PROJECT_SOURCE_DIR}/common/include)
  set(flags)
  set(headers)
  foreach(i IN LISTS includes)
    list(APPEND flags -I${i})
    file(GLOB_RECURSE h CONFIGURE_DEPENDS ${i}/*.hpp)
    list(APPEND headers ${h})
  endforeach()
  add_custom_command(
    OUTPUT ${dir}/${name}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}/corpus-${name}
    COMMAND ${HPCML_FUZZ_CXX} -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined
      -fno-sanitize-recover=undefined -include ${HPCML_FUZZ_SHIM} -DFMT_SHARED
      -DTOML_HEADER_ONLY=0 -DTOML_SHARED_LIB=1 ${flags} ${sources} -lfmt ${ARG_LIBS}
      -o ${dir}/${name}
    DEPENDS ${sources} ${headers} ${HPCML_FUZZ_SHIM}
    COMMENT "Building libFuzzer target ${name} with clang++"
    VERBATIM)
  add_custom_target(${name}_build ALL DEPENDS ${dir}/${name})
  add_test(NAME ${name}
    COMMAND ${dir}/${name} -max_total_time=10 -timeout=10 -rss_limit_mb=1024 -print_final_stats=1
      ${dir}/corpus-${name} ${ARG_SEEDS}
    WORKING_DIRECTORY ${dir})
  set_tests_properties(${name} PROPERTIES LABELS "unit;fuzz" TIMEOUT 120
    ENVIRONMENT "ASAN_OPTIONS=detect_leaks=1;UBSAN_OPTIONS=print_stacktrace=1")
endfunction()
