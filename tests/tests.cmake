# The C++ tests: a few executables, one per layer of what they exercise, each linking only the
# libraries that layer needs (a core test does not link gRPC, PostgreSQL or the HTTP front).
# Fewer executables means fewer links (98 before issue 28, each linking everything).
#
# How ctest runs them: a unit executable runs as a few ctest tests, each one gtest shard of its
# cases in one process (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX: case i runs in shard i mod N).
# Starting a test process costs 30-60 ms of CPU before its first case (loading 90 shared
# libraries, gRPC's and protobuf's static initialisers): over 1,400 one-case processes that was
# about a third of ctest's CPU on a 2-core machine. Integration cases spawn the real binary and
# take seconds each, so they stay one ctest test per case, found when ctest runs (gtest
# discovery PRE_TEST). One case by hand: build/unit_server_tests --gtest_filter='Suite.Case'.
# -DPF_TEST_SHARDS=OFF registers every unit case as its own ctest test instead.
#
# Adding a test file: put its name in the group whose libraries it needs. Configuring fails
# naming any tests/unit or tests/integration *_test.cpp that is in no group, or in two.

# Pure: decisions, scenarios, the simulator and bounded parsing.
set(PF_TESTS_CORE
  acceptance alerts billing blocklist bounded_json demand_estimate demand_forecast des_engine
  des_targets des_v2_default economics host_stats job_hedge job_money job_outcome job_schedule
  leader_lease learned_predictor lifecycle market_stop money_ledger offer_json offer_query oom_memory planner policy
  rental_terms
  predictor profit_bound query reconcile_plan reliability_checks scale_to_demand scenario
  scenario_generate scenario_v2 scoring sprt_acceptance unconfirmed_create)
# The manager's side without gRPC: store (SQLite, PostgreSQL), job queue, HTTP front, manager.
set(PF_TESTS_SERVER
  agent_logs_store autopilot client_jobs_store connection_pool dashboard fleet_watch hearing hot_reads
  hands_on http_api http_front http_wire job_dispatch_parity listen_fds socket_handover job_metrics job_queue_plan job_queue_restart
  job_queue job_timeline job_worker_roster jobs_api leader_lease_store leadership lifecycle_parity
  manager_jobs manager_offers manager_ops manager ops_api pg_connection store_copy store store_schema
  rate_limits store_url vast_market webhooks written_copies)
# What speaks gRPC or needs the whole program: agent, gateway, market-sim, CLI and config.
set(PF_TESTS_FLEET
  agent_cancel agent_cuzk agent_flow agent_outbox agent_param_manifest agent_params
  agent_parts agent_probe agent_work benchmark_input config deploy_onstart gateway_config
  gateway_validation http_api_benchmark_input load_generator market_sim operator_token
  ops_config sim_settings truth_model)
# tests/integration: they spawn the real binary.
set(PF_TESTS_INTEGRATION
  agent_cli agent_jobs demo failover gateway_relay gateway manager_e2e market_sim_http
  migrate_cli prometheus_alerts replicas sim_cli socket_activation spawned_agents_e2e takeover
  vast_market_sim)

option(PF_TEST_SHARDS "Run each unit test executable as a few gtest shards, not one ctest test per case" ON)
option(PF_UNITY_TESTS "Compile the test files of a group eight to a translation unit" ON)

# Every test file in exactly one group.
file(GLOB pf_unit_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/unit/*_test.cpp)
file(GLOB pf_integration_files CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tests/integration/*_test.cpp)
function(pf_check_test_groups dir files)
  set(grouped ${ARGN})
  foreach(f IN LISTS files)
    get_filename_component(n ${f} NAME_WE)
    string(REGEX REPLACE "_test$" "" n ${n})
    list(FIND grouped ${n} at)
    if(at EQUAL -1)
      message(FATAL_ERROR "tests/${dir}/${n}_test.cpp is in no test group: add it to a list in "
                          "tests/tests.cmake")
    endif()
    list(REMOVE_AT grouped ${at})
    list(FIND grouped ${n} again)
    if(NOT again EQUAL -1)
      message(FATAL_ERROR "tests/${dir}/${n}_test.cpp is in two test groups (tests/tests.cmake)")
    endif()
  endforeach()
  if(grouped)
    message(FATAL_ERROR "tests/tests.cmake names test files that do not exist in tests/${dir}: "
                        "${grouped}")
  endif()
endfunction()
pf_check_test_groups(unit "${pf_unit_files}" ${PF_TESTS_CORE} ${PF_TESTS_SERVER} ${PF_TESTS_FLEET})
pf_check_test_groups(integration "${pf_integration_files}" ${PF_TESTS_INTEGRATION})

function(pf_test_executable name dir)
  cmake_parse_arguments(PARSE_ARGV 2 arg "NEEDS_PG" "COST;SHARDS" "TESTS;LIBS")
  if(NOT arg_COST)
    set(arg_COST 0)
  endif()
  set(srcs)
  foreach(t IN LISTS arg_TESTS)
    list(APPEND srcs ${CMAKE_SOURCE_DIR}/tests/${dir}/${t}_test.cpp)
  endforeach()
  add_executable(${name} ${srcs})
  target_link_libraries(${name} PRIVATE ${arg_LIBS} pf_warnings GTest::gtest GTest::gtest_main
                        GTest::gmock PkgConfig::HTTPLIB nlohmann_json::nlohmann_json tl::expected)
  target_include_directories(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests ${CMAKE_SOURCE_DIR}/src)
  target_compile_definitions(${name} PRIVATE
    PF_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
    PF_BINARY="$<TARGET_FILE:proverfleet>")
  pf_test_code_flags(${name})
  # Unity build: a group's files compiled eight to a translation unit, so gtest, gmock, json and
  # the libraries' headers are parsed and their templates compiled once per eight files (test
  # objects 830 -> 533 step-seconds, docs/architecture.md "Build"). A file's anonymous-namespace
  # helpers share that namespace with the rest of its batch: a "redefinition of" error after
  # adding a file means two files chose one name; give each a name that says what it is.
  if(PF_UNITY_TESTS)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
  add_dependencies(${name} pf_test_pg_server)
  if(arg_SHARDS AND PF_TEST_SHARDS)
    # A shard prints only its failures (--gtest_brief): ctest --output-on-failure shows them.
    math(EXPR last "${arg_SHARDS} - 1")
    foreach(i RANGE ${last})
      set(shard ${name}.shard${i}of${arg_SHARDS})
      add_test(NAME ${shard} COMMAND ${name} --gtest_brief=1)
      set_tests_properties(${shard} PROPERTIES TIMEOUT 300 COST ${arg_COST}
        ENVIRONMENT "GTEST_TOTAL_SHARDS=${arg_SHARDS};GTEST_SHARD_INDEX=${i};${PF_TEST_PG_ENV}")
      if(arg_NEEDS_PG)
        set_tests_properties(${shard} PROPERTIES FIXTURES_REQUIRED pg)
      endif()
    endforeach()
  else()
    gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
      PROPERTIES TIMEOUT 300 COST ${arg_COST} FIXTURES_REQUIRED pg
                 ENVIRONMENT "${PF_TEST_PG_ENV}")
  endif()
endfunction()

# Shards: enough that none is the run's tail (one process: core ~26 s of CPU, most of it the
# DES targets; server ~55 s wall, most of it waiting on PostgreSQL restarts and sockets; fleet
# ~21 s wall), few enough that process start-up stays small.
#
# COST, here and on every other test: seconds the test takes in a full `make test` on a 2-core
# machine (one unit for all, so ctest, which starts tests in descending COST, starts the longest
# first and none of them is the run's tail). Integration cases take 1-5 s, but those of 10 s or
# more are listed with their own COST in tests/integration/costs.cmake.
pf_test_executable(unit_core_tests unit TESTS ${PF_TESTS_CORE} SHARDS 6 COST 50
  LIBS pf_sim pf_scenario pf_vast_json pf_util pf_core)
pf_test_executable(unit_server_tests unit TESTS ${PF_TESTS_SERVER} SHARDS 8 COST 26 NEEDS_PG
  LIBS pf_manager pf_jobs pf_store pf_net pf_market pf_sim pf_scenario pf_util pf_core)
pf_test_executable(unit_fleet_tests unit TESTS ${PF_TESTS_FLEET} SHARDS 4 COST 13
  LIBS pf_cli)
pf_test_executable(integration_tests integration TESTS ${PF_TESTS_INTEGRATION} LIBS pf_cli
  COST 3)
# After the discovery's own include (gtest_discover_tests added it above), at test time.
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
  ${CMAKE_SOURCE_DIR}/tests/integration/costs.cmake)
add_test(NAME integration_costs_listed COMMAND ${CMAKE_COMMAND}
  -DPF_LIST_OF=$<TARGET_FILE:integration_tests> -P ${CMAKE_SOURCE_DIR}/tests/integration/costs.cmake)
# deploy_onstart runs the binary's onstart text; integration tests spawn it.
add_dependencies(unit_fleet_tests proverfleet)
add_dependencies(integration_tests proverfleet)
