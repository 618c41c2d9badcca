# How the build is made fast on a 2-core machine (issue 28). Included from the top-level
# CMakeLists.txt before any target. What was measured, per translation unit, on one machine in
# one session (seconds to compile; docs/architecture.md, "Build"):
#
#                                  -O2 -g   -O2 -g1   -O1 -g1   -O2 -g + precompiled header
#   tests/unit/store_test.cpp        22.8      19.2      11.2      22.5
#   tests/unit/economics_test.cpp     6.0       4.7       4.0       6.5
#   src/manager/manager.cpp          14.4       9.4       7.5      14.7
#   src/core/economics.cpp            1.3       1.8*      1.7*      2.3     (* with the header)
#
# Code generation and debug info are where the time goes, not parsing headers: a shared
# precompiled header (std, json, expected, gtest/gmock, httplib) saved nothing on the large files
# and cost a second on the small ones, so there is none. What is done instead:
#   - debug info as line tables (-g1): backtraces, perf and valgrind still name file and line;
#     -DPF_FULL_DEBUG_INFO=ON gives gdb its variables back;
#   - test code (tests/, the fuzz corpus replays) at -O1: the code under test is the libraries',
#     compiled as the product is;
#   - lld and split DWARF: a test executable links in about a second;
#   - ccache when present.

option(PF_FAST_LINK "Link with lld and keep debug info in .dwo files (split DWARF)" ON)
option(PF_FULL_DEBUG_INFO "Full debug info (-g) instead of line tables (-g1)" OFF)

# ccache in depend mode: it hashes the compiler's own dependency list instead of running the
# preprocessor a second time, so a cold cache, as CI's fresh clone has, costs almost nothing.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_DEPEND=1 ${CCACHE_PROGRAM})
endif()

# Options added here come after CMAKE_CXX_FLAGS_<CONFIG> on the command line: the last -g wins.
if(NOT PF_FULL_DEBUG_INFO)
  add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
endif()

if(PF_FAST_LINK)
  find_program(PF_LLD ld.lld)
  if(PF_LLD)
    add_link_options(-fuse-ld=lld)
  else()
    message(STATUS "PF_FAST_LINK: ld.lld not found, linking with the default linker")
  endif()
  # Debug info stays in per-object .dwo files: the linker no longer copies it into every
  # executable (gdb reads the .dwo files next to the objects).
  add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-gsplit-dwarf>)
endif()

# Test code at -O1 where the product is optimised (the last -O on the command line wins).
function(pf_test_code_flags target)
  target_compile_options(${target} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
endfunction()

# Unity builds of the product's layers (not core and util: an edit there, the inner loop, rebuilds
# one small object). CLI11, json, httplib, spdlog and gRPC's headers are parsed and their inline
# code compiled once per batch instead of once per file. A file's anonymous-namespace names share
# the batch: give helpers names that say what they are. -DPF_UNITY_PRODUCT=OFF compiles the files
# one by one.
option(PF_UNITY_PRODUCT "Compile the product's layers (but core and util) four files to a unit" ON)
function(pf_unity_layer target)
  if(PF_UNITY_PRODUCT AND NOT target MATCHES "^pf_(core|util)$")
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 4)
    # gcc's warning that a class uses a type from an anonymous namespace is meant for headers; in
    # a unity unit every source is an included file, so each .cpp's private types would trip it.
    target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
  endif()
endfunction()
