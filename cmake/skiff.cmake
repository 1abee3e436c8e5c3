# Small helpers in the spirit of abseil's absl_cc_library / absl_cc_test.

# skiff_library(NAME name SRCS ... DEPS ...)
function(skiff_library)
  cmake_parse_arguments(L "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${L_NAME} STATIC ${L_SRCS})
  target_include_directories(${L_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${L_NAME} PUBLIC ${L_DEPS})
endfunction()

# skiff_test(NAME name SRCS ... DEPS ... LABELS ... [TIMEOUT s])
# Labels: unit | integration | e2e, plus what the test needs: needs_root, needs_qemu, needs_kvm.
# RUN_SERIAL: for tests that count host-wide state (processes, mounts, cgroups).
function(skiff_test)
  cmake_parse_arguments(T "RUN_SERIAL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_compile_definitions(${T_NAME} PRIVATE
    SKIFF_SOURCE_DIR="${PROJECT_SOURCE_DIR}" SKIFF_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(serial FALSE)
  if(T_RUN_SERIAL)
    set(serial TRUE)
  endif()
  # gtest_discover_tests passes PROPERTIES through a command line that
  # loses escaped semicolons, so a second label would shift the list (it
  # swallowed TIMEOUT's name, and RUN_SERIAL was lost). One label joins them
  # with commas; `ctest -L` matches labels by regex, so -L needs_root works.
  string(REPLACE ";" "," labels "${T_LABELS}")
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS "${labels}" TIMEOUT ${T_TIMEOUT} RUN_SERIAL ${serial}
    DISCOVERY_TIMEOUT 60)
endfunction()
