# Wrapper functions so that each folder's CMakeLists.txt lists only names and dependencies.
#
#   gpusched_library(NAME <layer> SRCS a.cc b.cc DEPS other_lib ... [WARNINGS_STRICT])
#     -> static library gpusched_<layer>, alias gpusched::<layer>
#   gpusched_test(NAME <name> SRCS x_test.cc DEPS ... [LABELS unit])
#     -> GoogleTest binary registered with ctest (label unit unless told)
#   gpusched_benchmark(NAME <name> SRCS x_benchmark.cc DEPS ...)
#     -> Google Benchmark binary; a smoke run is registered with ctest label bench

set(GPUSCHED_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Wnon-virtual-dtor
    -Wold-style-cast -Woverloaded-virtual
    # Designated initialisers (STYLE.md 6) leave members defaulted on purpose.
    -Wno-missing-field-initializers)
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # GCC 12 false positive on std::string concatenation at -O2 (GCC bug 105329); clang has no such option.
  list(APPEND GPUSCHED_WARNINGS -Wno-restrict)
endif()

if(GPUSCHED_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(GPUSCHED_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT GPUSCHED_SANITIZE STREQUAL "")
  message(FATAL_ERROR "GPUSCHED_SANITIZE must be '', 'address' or 'thread', got '${GPUSCHED_SANITIZE}'")
endif()

# Precompiled headers (GPUSCHED_PCH, on by default): parsing the C++ library, nlohmann/json and GoogleTest took
# about half of each translation unit's compile. Two headers are compiled once per build, each in a carrier target
# with the flags of the targets that reuse it (GCC accepts a PCH only under the same -O level and sanitizers):
# gpusched_pch_lib for the libraries and executables, gpusched_pch_test (also GoogleTest and GoogleMock) for the
# tests. common/, core/, policy/ and ports/ do not use them: those layers include no third-party header, and a PCH
# that brings nlohmann/json along would hide a header that forgot its own includes. Benchmarks do not either (few
# files). A build with -DGPUSCHED_PCH=OFF compiles every file on its own includes.
# Every file compiles with -pthread (every binary links Threads::Threads anyway): it defines _REENTRANT, which the
# standard headers read, and a PCH is usable only where it is defined the same way.
add_compile_options(-pthread)
set(GPUSCHED_PCH_STD <algorithm> <chrono> <cstdint> <functional> <map> <memory> <mutex> <optional> <set> <sstream>
    <string> <string_view> <unordered_map> <utility> <variant> <vector>)
set(GPUSCHED_PCH_NO_PCH_LAYERS common core policy ports)

function(gpusched_pch_carriers)
  if(NOT GPUSCHED_PCH OR TARGET gpusched_pch_lib)
    return()
  endif()
  add_library(gpusched_pch_lib OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch/pch.cc)
  target_compile_options(gpusched_pch_lib PRIVATE ${GPUSCHED_WARNINGS})
  # nlohmann_json's target defines nothing (every one of its definitions is conditional and off); a header whose
  # target defines macros (fmt's FMT_SHARED) stays out: a TU without the macro would find the PCH invalid.
  target_link_libraries(gpusched_pch_lib PRIVATE nlohmann_json::nlohmann_json)
  target_precompile_headers(gpusched_pch_lib PRIVATE ${GPUSCHED_PCH_STD} <nlohmann/json.hpp>)
  if(GPUSCHED_BUILD_TESTS)
    add_library(gpusched_pch_test OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch/pch.cc)
    target_compile_options(gpusched_pch_test PRIVATE -Wall -Wextra -Wshadow -Wno-missing-field-initializers)
    if(GPUSCHED_SANITIZE)
      target_compile_options(gpusched_pch_test PRIVATE -O0)
    endif()
    target_link_libraries(gpusched_pch_test PRIVATE nlohmann_json::nlohmann_json GTest::gtest GTest::gmock)
    target_precompile_headers(gpusched_pch_test PRIVATE ${GPUSCHED_PCH_STD} <nlohmann/json.hpp> <gmock/gmock.h>
                              <gtest/gtest.h>)
  endif()
endfunction()

# The library PCH for an executable or library target of the project's own flags (no-op with GPUSCHED_PCH off).
function(gpusched_use_pch target)
  if(GPUSCHED_PCH)
    gpusched_pch_carriers()
    target_precompile_headers(${target} REUSE_FROM gpusched_pch_lib)
  endif()
endfunction()

function(gpusched_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  set(target gpusched_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SRCS})
  add_library(gpusched::${ARG_NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${GPUSCHED_SOURCE_ROOT})
  target_compile_options(${target} PRIVATE ${GPUSCHED_WARNINGS})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  if(NOT ARG_NAME IN_LIST GPUSCHED_PCH_NO_PCH_LAYERS)
    gpusched_use_pch(${target})
  endif()
endfunction()

function(gpusched_test)
  if(NOT GPUSCHED_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_compile_options(${ARG_NAME} PRIVATE -Wall -Wextra -Wshadow -Wno-missing-field-initializers)
  if(GPUSCHED_SANITIZE)
    # Under a sanitizer the test files themselves (GoogleTest's macros, not the code under test) compile at -O0:
    # half the compile time of -O1, which was half the CI build.
    target_compile_options(${ARG_NAME} PRIVATE -O0)
  endif()
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  if(GPUSCHED_PCH)
    gpusched_pch_carriers()
    target_precompile_headers(${ARG_NAME} REUSE_FROM gpusched_pch_test)
  endif()
  # cairo's fontconfig keeps a small cache for the life of the process; LeakSanitizer must not call it a leak.
  # ENVIRONMENT holds one variable here: gtest_discover_tests splits a list value into separate property arguments,
  # so a second variable was silently dropped. TSAN_OPTIONS comes from the `tsan` test preset (CMakePresets.json).
  gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${ARG_LABELS}"
                       ENVIRONMENT "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/lsan.supp")
endfunction()

function(gpusched_benchmark)
  if(NOT GPUSCHED_BUILD_BENCHMARKS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_compile_options(${ARG_NAME} PRIVATE -Wall -Wextra -Wno-missing-field-initializers)
  if(GPUSCHED_SANITIZE)
    target_compile_options(${ARG_NAME} PRIVATE -O0)  # only smoke-run there; timings come from the release build
  endif()
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark)
  # Smoke run: every benchmark once, minimal time, so CI proves they still run.
  add_test(NAME ${ARG_NAME}_smoke COMMAND ${ARG_NAME} --benchmark_min_time=0.001)
  set_tests_properties(${ARG_NAME}_smoke PROPERTIES LABELS bench)
endfunction()
