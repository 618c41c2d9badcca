# Fuzz targets (fuzz/<name>_fuzz.cpp, one per parser) and their committed seed corpora
# (fuzz/corpus/<name>/). Included from the top-level CMakeLists.txt after the libraries.
#
# Every build: fuzz_<name>_corpus = the target + fuzz/standalone_main.cpp, which replays the
# corpus once; registered as ctest `fuzz_corpus_<name>` (label `reliability`).
# -DPF_FUZZ=ON (clang; see `make reliability`): <name>_fuzz, linked against libFuzzer, with
# ASan and UBSan over the target and the libraries it uses.
#
# Each target links only what its parser needs (no target pulls in gRPC).

set(PF_FUZZ_NAMES query scenario config manifest vast_reply request_body)

# The parser's own sources are compiled into each target (not linked from their layer's
# library) so that the gcc corpus runners carry UBSan over exactly the code under test: an
# out-of-range float-to-int conversion then fails `make test` too, not only `make reliability`.
file(GLOB PF_FUZZ_MARKET_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/market/*.cpp)
function(pf_fuzz_deps name exe)
  set(src ${CMAKE_SOURCE_DIR}/src)
  if(name STREQUAL "query")
    target_sources(${exe} PRIVATE ${src}/market/query.cpp)
    target_link_libraries(${exe} PRIVATE pf_core)
  elseif(name STREQUAL "vast_reply")
    target_sources(${exe} PRIVATE ${PF_FUZZ_MARKET_SOURCES})
    target_link_libraries(${exe} PRIVATE pf_core CURL::libcurl)
  elseif(name STREQUAL "scenario")
    target_sources(${exe} PRIVATE ${src}/scenario/scenario.cpp ${src}/market/offer_json.cpp)
    target_link_libraries(${exe} PRIVATE pf_core)
  elseif(name STREQUAL "config")
    # The [gateway] checks (allow-list, listen exposure) are pure; no gRPC comes with them.
    target_sources(${exe} PRIVATE ${src}/cli/config.cpp ${src}/gateway/client_allow.cpp
                                  ${src}/market/rate_limits.cpp
                                  ${src}/gateway/listen_exposure.cpp ${src}/jobs/proof_check.cpp)
    target_link_libraries(${exe} PRIVATE pf_core tomlplusplus::tomlplusplus)
  elseif(name STREQUAL "manifest")
    target_sources(${exe} PRIVATE ${src}/agent/params.cpp ${src}/agent/param_manifest.cpp
                                  ${src}/agent/benchmark_input.cpp ${PF_PARAM_MANIFESTS_CPP}
                                  ${PF_FUZZ_MARKET_SOURCES})
    target_link_libraries(${exe} PRIVATE pf_core CURL::libcurl PkgConfig::B2 Threads::Threads)
  elseif(name STREQUAL "request_body")
    target_link_libraries(${exe} PRIVATE pf_manager)
  else()
    message(FATAL_ERROR "fuzz target ${name}: no dependencies listed in fuzz/fuzz.cmake")
  endif()
  target_include_directories(${exe} PRIVATE ${CMAKE_SOURCE_DIR} ${src} ${CMAKE_SOURCE_DIR}/tests)
  # Every parser reads JSON through the one bounded entry point (src/util).
  target_link_libraries(${exe} PRIVATE pf_util pf_warnings nlohmann_json::nlohmann_json
                                       tl::expected)
endfunction()

foreach(name IN LISTS PF_FUZZ_NAMES)
  set(src ${CMAKE_SOURCE_DIR}/fuzz/${name}_fuzz.cpp)
  if(PF_FUZZ)
    add_executable(${name}_fuzz ${src})
    target_link_options(${name}_fuzz PRIVATE -fsanitize=fuzzer)
    pf_fuzz_deps(${name} ${name}_fuzz)
  else()
    add_executable(fuzz_${name}_corpus ${src} ${CMAKE_SOURCE_DIR}/fuzz/standalone_main.cpp)
    pf_fuzz_deps(${name} fuzz_${name}_corpus)
    # gcc leaves float-cast-overflow out of "undefined"; clang's includes it.
    target_compile_options(fuzz_${name}_corpus PRIVATE -fsanitize=undefined,float-cast-overflow
                           -fno-sanitize-recover=all)
    target_link_options(fuzz_${name}_corpus PRIVATE -fsanitize=undefined,float-cast-overflow)
    pf_test_code_flags(fuzz_${name}_corpus)
    # The parser's sources are compiled here a second time (with UBSan): eight to a unit.
    set_target_properties(fuzz_${name}_corpus PROPERTIES UNITY_BUILD ${PF_UNITY_PRODUCT}
                                                         UNITY_BUILD_BATCH_SIZE 8)
    target_compile_options(fuzz_${name}_corpus PRIVATE -Wno-subobject-linkage)
    add_test(NAME fuzz_corpus_${name}
             COMMAND fuzz_${name}_corpus ${CMAKE_SOURCE_DIR}/fuzz/corpus/${name})
    set_tests_properties(fuzz_corpus_${name} PROPERTIES LABELS reliability TIMEOUT 300)
  endif()
endforeach()
