# infernix_fuzz_target(NAME name SOURCE file.cpp LIBS lib ...)
# One libFuzzer target, built only in the clang fuzzing build of scripts/fuzz.sh (-DINFERNIX_FUZZ=ON,
# which also compiles every library with -fsanitize=fuzzer-no-link,address,undefined).
function(infernix_fuzz_target)
  cmake_parse_arguments(F "" "NAME;SOURCE" "LIBS" ${ARGN})
  add_executable(${F_NAME} ${F_SOURCE})
  target_link_libraries(${F_NAME} PRIVATE ${F_LIBS})
  target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer)
endfunction()
