# Files compiled into the binary (the dashboard's web/ files, the shipped params/*.json), so it
# runs without the source tree. One pattern, two halves:
#
# Configure side, from CMakeLists.txt:
#   pf_embed_files(<target> SCRIPT <gen.cmake> OUT <cpp> FILES <paths...> COMMENT <text>)
#   runs <gen.cmake> as `cmake -P` with OUT and FILES whenever a file, the script or this module
#   changes, and compiles OUT into <target>. FILES travel |-separated: "|" survives the build
#   tool's command line, where ";" would not.
#
# Script side, in <gen.cmake> (which include()s this file and only writes the C++ text):
#   pf_embed_input_files(<var> <who>)  the sorted paths from FILES (FATAL_ERROR, naming <who>,
#                                      when OUT is not set)
#   pf_embed_write(<text>)             writes OUT only when its content changes, so unchanged
#                                      inputs do not recompile

function(pf_embed_files target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SCRIPT;OUT;COMMENT" "FILES")
  list(JOIN arg_FILES "|" files_arg)
  add_custom_command(
    OUTPUT ${arg_OUT}
    COMMAND ${CMAKE_COMMAND} -DOUT=${arg_OUT} -DFILES=${files_arg} -P ${arg_SCRIPT}
    DEPENDS ${arg_FILES} ${arg_SCRIPT} ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    COMMENT "${arg_COMMENT}"
    VERBATIM)
  target_sources(${target} PRIVATE ${arg_OUT})
endfunction()

macro(pf_embed_input_files var who)
  if(NOT OUT)
    message(FATAL_ERROR "${who}: set OUT (and FILES)")
  endif()
  string(REPLACE "|" ";" ${var} "${FILES}")
  list(SORT ${var})
endmacro()

function(pf_embed_write text)
  if(EXISTS "${OUT}")
    file(READ "${OUT}" old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${OUT}" "${text}")
endfunction()
