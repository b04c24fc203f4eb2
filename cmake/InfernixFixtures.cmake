# Fixtures are stored in the repository compressed where that pays (*.zst) and laid out, decompressed,
# under ${CMAKE_BINARY_DIR}/fixtures at build time (target infernix_fixtures).
set(INFERNIX_FIXTURES_DIR ${CMAKE_BINARY_DIR}/fixtures)

# infernix_stage_files(OUT_VAR SRC_DIR DST_DIR): copy every file below SRC_DIR to DST_DIR, decompressing
# *.zst; appends the produced paths to OUT_VAR.
function(infernix_stage_files out_var src_dir dst_dir)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS RELATIVE ${src_dir} ${src_dir}/*)
  set(outputs ${${out_var}})
  foreach(rel ${files})
    if(rel MATCHES "(^|/)(CMakeLists\\.txt|README\\.md)$")
      continue()
    endif()
    set(in ${src_dir}/${rel})
    if(rel MATCHES "\\.zst$")
      string(REGEX REPLACE "\\.zst$" "" rel_out ${rel})
      set(out ${dst_dir}/${rel_out})
      add_custom_command(OUTPUT ${out}
        COMMAND infernix_unzstd ${in} ${out}
        DEPENDS ${in} VERBATIM)
    else()
      set(out ${dst_dir}/${rel})
      add_custom_command(OUTPUT ${out}
        COMMAND ${CMAKE_COMMAND} -E copy ${in} ${out}
        DEPENDS ${in} VERBATIM)
    endif()
    list(APPEND outputs ${out})
  endforeach()
  set(${out_var} ${outputs} PARENT_SCOPE)
endfunction()
