# Read by ctest itself, after it has discovered the integration cases (tests/tests.cmake adds it
# to TEST_INCLUDE_FILES): the cases that take 10 s or more, each with its COST in seconds, as
# measured in a full `make test` run on a 2-core machine (Testing/Temporary/LastTest.log).
#
# ctest starts tests in descending COST. Every discovered case gets the executable's COST, so
# without this list the 50 s failover cases started after every short case and finished the run
# 50 s after everything else (ctest wall 139 s, of which the last 40 s ran three tests).
#
# ctest ignores a COST set on a name it does not have, so the test integration_costs_listed runs
# this file as a script (cmake -DPF_LIST_OF=<integration_tests> -P costs.cmake) and fails naming
# any case here that the executable does not list: move its line when renaming a case.
set(pf_slow_cases
    "Db/Failover.LeaderKilledMidRunLosesNoJobAndRentsNothingTwice/sqlite=51"
    "Db/Failover.LeaderKilledMidRunLosesNoJobAndRentsNothingTwice/postgres=50"
    "AgentJobs.JobsAreProvedWithTheirOwnInputsAndALostAgentsJobIsFinishedElsewhere=34"
    "AgentJobsHedging.AJobStuckOnASlowedProverIsProvedByASecondAgent=30"
    "Db/SpawnedAgentsOnStores.ThreeDeployedOffersRunRealAgentsUntilJudgedAndLeaveNothingBehind/sqlite=30"
    "Db/SpawnedAgentsOnStores.ThreeDeployedOffersRunRealAgentsUntilJudgedAndLeaveNothingBehind/postgres=30"
    "Demo.ServesTheScenariosJobsThroughTheGateway=28"
    "Db/ManagerE2E.LostHeartbeatDestroys/sqlite=17"
    "Db/ManagerE2E.LostHeartbeatDestroys/postgres=17"
    "Db/Replicas.APausedExLeaderRentsNothingOnceItWakes/sqlite=16"
    "Db/Replicas.APausedExLeaderRentsNothingOnceItWakes/postgres=16"
    "AgentJobs.ACancelledJobIsStoppedInTheAgentsProverAndItsSlotTakesNewWork=16"
    "Takeover.ThePlannedRestartFailsNoCallAndTheOldServeExitsOnceItsCallIsAnswered=15"
    "Db/ManagerE2E.AContractEndClosesTheRentalBlamingNoHost/sqlite=13"
    "Db/ManagerE2E.AContractEndClosesTheRentalBlamingNoHost/postgres=13"
    "Demo.FleetEvolvesAndSigtermLeavesNoProcessBehind=13"
    "AgentJobs.HeartbeatsAndHealthzAreAnsweredWhileFiftyLongPollsAreParked=12"
    "SpawnedAgentsE2E.SigkillOfMarketSimLeavesNoSpawnedProcessRunning=12"
    "Db/ManagerE2E.ManagerKilledMidFlightLosesNothingAndRentsNothingTwice/sqlite=10"
    "Db/ManagerE2E.ManagerKilledMidFlightLosesNothingAndRentsNothingTwice/postgres=10"
    "SimCli.CompareOnAV3ScenarioRunsTheDefaultPolicyOnDemandAndWithBids=10"
    "PrometheusAlerts.ARealPrometheusScrapingServePagesOnSpendOverBudgetAndOnNothingElse=10")

if(PF_LIST_OF)
  cmake_minimum_required(VERSION 3.25)  # script mode: today's policies (IN_LIST)
  execute_process(COMMAND ${PF_LIST_OF} --gtest_list_tests OUTPUT_VARIABLE pf_listed
                  RESULT_VARIABLE pf_rc)
  if(NOT pf_rc EQUAL 0)
    message(FATAL_ERROR "${PF_LIST_OF} --gtest_list_tests failed (${pf_rc})")
  endif()
  # gtest lists "Suite." then "  Case  # GetParam() = ..." per case; ctest's names (discovered
  # with NO_PRETTY_VALUES) are Suite.Case.
  string(REPLACE "\n" ";" pf_lines "${pf_listed}")
  set(pf_names)
  foreach(pf_line IN LISTS pf_lines)
    if(pf_line MATCHES "^([^ ]+\\.)")
      set(pf_suite "${CMAKE_MATCH_1}")
    elseif(pf_line MATCHES "^  ([^ ]+)")
      list(APPEND pf_names "${pf_suite}${CMAKE_MATCH_1}")
    endif()
  endforeach()
  set(pf_missing)
  foreach(pf_slow_case IN LISTS pf_slow_cases)
    string(REGEX REPLACE "=[0-9]+$" "" pf_name "${pf_slow_case}")
    if(NOT pf_name IN_LIST pf_names)
      list(APPEND pf_missing "${pf_name}")
    endif()
  endforeach()
  if(pf_missing)
    list(JOIN pf_missing "\n  " pf_missing)
    message(FATAL_ERROR "tests/integration/costs.cmake names cases that ${PF_LIST_OF} does not "
                        "have (renamed or removed?):\n  ${pf_missing}")
  endif()
  list(LENGTH pf_slow_cases pf_count)
  message(STATUS "all ${pf_count} cases of tests/integration/costs.cmake exist")
  return()
endif()

foreach(pf_slow_case IN LISTS pf_slow_cases)
  string(FIND "${pf_slow_case}" "=" pf_at REVERSE)
  string(SUBSTRING "${pf_slow_case}" 0 ${pf_at} pf_name)
  math(EXPR pf_at "${pf_at} + 1")
  string(SUBSTRING "${pf_slow_case}" ${pf_at} -1 pf_cost)
  set_tests_properties("${pf_name}" PROPERTIES COST ${pf_cost})
endforeach()
