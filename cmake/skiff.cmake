# Small helpers in the spirit of abseil's absl_cc_library / absl_cc_test.

# skiff_library(NAME name SRCS ... DEPS ... [PUBLIC ...] [AGENT])
# Dependencies are PRIVATE: linking a library does not hand its
# dependencies' usage requirements to its consumers. Those after the PUBLIC
# keyword in DEPS are propagated; they are the ones whose headers the
# library's own headers include. (A static library's private dependencies
# are still linked into whatever links it.)
# AGENT: the static skiff-agent links this library too, as ${name}_for_agent.
# That is the library itself, or, when SKIFF_SANITIZE is set, an
# uninstrumented copy of it (same sources, same settings, dependencies
# replaced by their own _for_agent copies): a sanitizer runtime cannot be
# linked into a -static binary.
function(skiff_library)
  cmake_parse_arguments(L "AGENT" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(${L_NAME} STATIC ${L_SRCS})
  target_include_directories(${L_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${L_NAME} PRIVATE ${L_DEPS})
  string(REGEX REPLACE "^skiff_" "" short "${L_NAME}")
  add_library(skiff::${short} ALIAS ${L_NAME})
  if(L_AGENT AND SKIFF_SANITIZE)
    # Copied at the end of the calling directory, once its CMakeLists.txt
    # has added the library's definitions and include directories.
    cmake_language(EVAL CODE "cmake_language(DEFER CALL _skiff_copy_for_agent [[${L_NAME}]])")
  elseif(L_AGENT)
    add_library(${L_NAME}_for_agent ALIAS ${L_NAME})
  endif()
endfunction()

function(_skiff_copy_for_agent name)
  get_target_property(srcs ${name} SOURCES)
  add_library(${name}_for_agent STATIC ${srcs})
  set_target_properties(${name}_for_agent PROPERTIES SKIFF_NO_SANITIZE ON)
  foreach(prop IN ITEMS INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES
                        COMPILE_DEFINITIONS INTERFACE_COMPILE_DEFINITIONS
                        COMPILE_OPTIONS INTERFACE_COMPILE_OPTIONS
                        LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(values ${name} ${prop})
    if(NOT values)
      set(values "")
    endif()
    set(copied "")
    foreach(v IN LISTS values)
      if(prop MATCHES "LINK_LIBRARIES$")
        set(dep "${v}")
        if(v MATCHES "^\\$<LINK_ONLY:(.*)>$")
          set(dep "${CMAKE_MATCH_1}")
        endif()
        if(TARGET ${dep}_for_agent)
          string(REPLACE "${dep}" "${dep}_for_agent" v "${v}")
        endif()
      endif()
      list(APPEND copied "${v}")
    endforeach()
    set_property(TARGET ${name}_for_agent PROPERTY ${prop} "${copied}")
  endforeach()
endfunction()

# skiff_test(NAME name SRCS ... DEPS ... LABELS ... [TIMEOUT s])
# Labels: unit | integration | e2e, plus what the test needs: needs_root, needs_qemu, needs_kvm.
# RUN_SERIAL: for tests that count host-wide state (processes, mounts, cgroups).
# Every test links skiff_test_support (tests/support: "support/temp_dir.h").
function(skiff_test)
  cmake_parse_arguments(T "RUN_SERIAL" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_executable(${T_NAME} ${T_SRCS})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} skiff_test_support GTest::gtest GTest::gmock GTest::gtest_main)
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
