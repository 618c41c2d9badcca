# The reliability suite's runner (tests/reliability): the bad-input HTTP corpus and the chaos
# run against the real binary, each printing the figures table. `make test` runs a fast subset
# (ctest label `reliability`); scripts/reliability (make reliability) the long settings.
if(NOT PF_FUZZ)
  file(GLOB PF_RELIABILITY_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/reliability/*.cpp)
  add_executable(reliability_suite ${PF_RELIABILITY_SOURCES})
  target_include_directories(reliability_suite PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  target_link_libraries(reliability_suite PRIVATE pf_warnings nlohmann_json::nlohmann_json
                        PkgConfig::HTTPLIB Threads::Threads)
  add_dependencies(reliability_suite proverfleet)
  pf_test_code_flags(reliability_suite)

  add_test(NAME reliability_http_corpus
           COMMAND reliability_suite http-corpus --binary $<TARGET_FILE:proverfleet>
                   --source ${CMAKE_SOURCE_DIR})
  # Short settings: about 1.5 minutes beside the other tests, the longest test of `make test`
  # (it sets how long the whole run takes): 28 s before the kill is enough for the autopilot to
  # rent its 4 instances and judge 3 of them. serve stays down longer than heartbeat_timeout_s
  # (here 12 s: agents beat every 2 s), and runs 24 s after its restart, longer than that
  # timeout again, so every agent's silence is one the manager must not blame on its host; the
  # long run (scripts/reliability) keeps the default 20 s and longer phases.
  add_test(NAME reliability_chaos_short
           COMMAND reliability_suite chaos --binary $<TARGET_FILE:proverfleet>
                   --source ${CMAKE_SOURCE_DIR} --time-scale 60 --before-kill-s 28
                   --heartbeat-timeout-s 12 --serve-down-s 15 --after-restart-s 24
                   --cleanup-timeout-s 90)
  set_tests_properties(reliability_http_corpus PROPERTIES LABELS reliability TIMEOUT 600
                       COST 24)
  # Started first (COST): the longest test of `make test`, mostly scripted waiting, so it runs
  # beside the others instead of alone; its figures count only what the manager did to healthy
  # hosts, and the hearing rules keep a loaded manager from blaming them.
  set_tests_properties(reliability_chaos_short PROPERTIES LABELS reliability TIMEOUT 900
                       COST 100)
endif()
