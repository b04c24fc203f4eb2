# infernix_test(NAME name SOURCES a_test.cpp ... LIBS lib ... [LABELS l ...])
# One GoogleTest binary registered as one CTest test. Tests find their fixtures (decompressed into
# the build tree) through the INFERNIX_FIXTURES_DIR environment variable and compile definition.
function(infernix_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock infernix_warnings)
  target_compile_definitions(${T_NAME} PRIVATE INFERNIX_FIXTURES_DIR="${INFERNIX_FIXTURES_DIR}")
  add_dependencies(${T_NAME} infernix_fixtures)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} --gtest_brief=1)
  set_tests_properties(${T_NAME} PROPERTIES
    ENVIRONMENT "INFERNIX_FIXTURES_DIR=${INFERNIX_FIXTURES_DIR}"
    LABELS "${T_LABELS}")
endfunction()
