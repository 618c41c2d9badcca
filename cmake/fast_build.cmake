# How the build is made fast on a 2-core machine (issue 28): compile less (precompiled headers
# shared by every target), link less and faster (lld, split DWARF), cache what can be cached
# (ccache, with the settings precompiled headers need). Included from the top-level
# CMakeLists.txt before any target. Every switch has an option to turn it off, for a build that
# must show what it costs.

option(PF_PCH "Precompile the standard library, json and expected (and gtest/gmock for tests)" ON)
option(PF_FAST_LINK "Link with lld and keep debug info in .dwo files (split DWARF)" ON)

# ccache: sloppiness for precompiled headers (else every PCH user is compiled uncached), and
# depend mode (hash the compiler's own dependency list instead of running the preprocessor a
# second time: a cold cache, as CI's fresh clone has, then costs almost nothing).
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_DEPEND=1 ${CCACHE_PROGRAM})
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

# pf_pch_anchor / pf_test_pch_anchor own the precompiled headers; every other target reuses them
# (pf_use_pch / pf_use_test_pch), so each is compiled once. Reuse needs the same compile flags,
# hence pf_warnings on both. -Winvalid-pch (an error under -Werror) catches a target whose flags
# drifted: gcc would silently parse the headers again.
set(PF_PCH_HEADERS
  <algorithm> <array> <atomic> <chrono> <cmath> <condition_variable> <cstdint> <cstdio>
  <cstring> <deque> <filesystem> <fstream> <functional> <limits> <map> <memory> <mutex>
  <optional> <random> <set> <sstream> <stdexcept> <string> <string_view> <thread>
  <unordered_map> <utility> <vector>
  <nlohmann/json.hpp> <tl/expected.hpp>)
if(PF_PCH)
  # CONFIGURE writes only when the text changes: a reconfigure must not recompile the anchors.
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/gen/pch_anchor.cpp
       CONTENT "// Owns the shared precompiled header.\n")
  add_library(pf_pch_anchor STATIC ${CMAKE_BINARY_DIR}/gen/pch_anchor.cpp)
  target_link_libraries(pf_pch_anchor PRIVATE pf_warnings nlohmann_json::nlohmann_json
                        tl::expected)
  target_precompile_headers(pf_pch_anchor PRIVATE ${PF_PCH_HEADERS})
  target_compile_options(pf_pch_anchor PRIVATE -Winvalid-pch)

  add_library(pf_test_pch_anchor STATIC ${CMAKE_BINARY_DIR}/gen/pch_anchor.cpp)
  target_link_libraries(pf_test_pch_anchor PRIVATE pf_warnings nlohmann_json::nlohmann_json
                        tl::expected GTest::gtest GTest::gmock PkgConfig::HTTPLIB)
  target_precompile_headers(pf_test_pch_anchor PRIVATE ${PF_PCH_HEADERS}
                            <gtest/gtest.h> <gmock/gmock.h> <httplib.h>)
  target_compile_options(pf_test_pch_anchor PRIVATE -Winvalid-pch)
endif()

function(pf_use_pch target)
  if(PF_PCH)
    target_precompile_headers(${target} REUSE_FROM pf_pch_anchor)
    target_compile_options(${target} PRIVATE -Winvalid-pch)
  endif()
endfunction()

function(pf_use_test_pch target)
  if(PF_PCH)
    target_precompile_headers(${target} REUSE_FROM pf_test_pch_anchor)
    target_compile_options(${target} PRIVATE -Winvalid-pch)
  endif()
endfunction()

# GCC 12 with a precompiled header reports libstdc++'s own std::string code as out of bounds
# (-Warray-bounds / -Wstringop-overflow, the false positives of GCC PR 105329 and 105651, which
# the same file without the header does not show). Rather than switch those warnings off for
# everything, the few files that hit it are compiled without the precompiled header. A new file
# failing with "forming offset ... out of the bounds [0, 32] of object ... basic_string" in
# char_traits.h belongs in this list.
set(PF_PCH_SKIP
  src/agent/param_manifest.cpp
  src/agent/prover_sim.cpp
  src/cli/manager_client.cpp
  src/core/acceptance.cpp
  src/core/planner.cpp
  src/manager/leader_forward.cpp
  tests/unit/agent_flow_test.cpp
  tests/unit/des_targets_test.cpp
  tests/unit/des_v2_default_test.cpp
  tests/unit/ops_config_test.cpp
  tests/unit/scenario_test.cpp
  tests/unit/sim_settings_test.cpp)
if(PF_PCH)
  foreach(f IN LISTS PF_PCH_SKIP)
    set_source_files_properties(${CMAKE_SOURCE_DIR}/${f} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
  endforeach()
endif()
