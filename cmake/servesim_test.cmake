# servesim_add_test(NAME SOURCES a.cc b.cc LIBS lib... LABELS unit|golden|slow)
# One GoogleTest executable registered with CTest (tests discovered individually).
include(GoogleTest)
function(servesim_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # Test files each keep their own helpers in anonymous namespaces: compiled one by one even in a
  # unity build of the libraries.
  set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main servesim_build_flags)
  gtest_discover_tests(${name}
    TEST_PREFIX "${name}."
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    PROPERTIES LABELS "${ARG_LABELS}" ENVIRONMENT "SERVESIM_DATA=${PROJECT_SOURCE_DIR}"
    DISCOVERY_TIMEOUT 60)
endfunction()
