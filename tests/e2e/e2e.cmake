# The gateway's end-to-end tests (tests/e2e): a Curio stand-in written in Python over stubs it
# generates from proto/ at run time (Debian's python3-grpcio and python3-grpc-tools, from
# scripts/install-deps). Debian installs those for the system interpreter only, so the tests
# run /usr/bin/python3 whatever python3 comes first in PATH.
find_program(PF_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(PF_SYSTEM_PYTHON3)
  set(PF_E2E_PYTHON ${PF_SYSTEM_PYTHON3})
else()
  set(PF_E2E_PYTHON python3)
endif()

# The client's own checks against an in-process fake daemon: retries with the same request_id,
# MaxPending, a wrong proof noticed. Seconds.
add_test(NAME e2e_curio_client_selftest
         COMMAND ${PF_E2E_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/curio_client_selftest.py
                 --proto-dir ${CMAKE_SOURCE_DIR}/proto)
set_tests_properties(e2e_curio_client_selftest PROPERTIES LABELS e2e TIMEOUT 120)

# The gateway end to end: market-sim with spawned sim agents + serve with its gateway, 200 jobs
# through the Python client, an agent SIGKILLed mid-proof and serve SIGKILLed and restarted;
# every job answered once with its own proof, none lost or duplicated in the store, nothing
# leaked. About 2.5 minutes on a loaded 2-core machine.
add_test(NAME e2e_gateway
         COMMAND ${PF_E2E_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/gateway_e2e.py
                 --binary $<TARGET_FILE:proverfleet> --source ${CMAKE_SOURCE_DIR} --jobs 200)
set_tests_properties(e2e_gateway PROPERTIES LABELS e2e TIMEOUT 900 RUN_SERIAL TRUE)

# The same run on PostgreSQL (a fresh database on the ctest run's server, fixture pg), with
# fewer jobs: the store is what differs, and the agent kill and the serve restart still happen.
# About 1 minute (60 jobs took 77 s on the loaded 2-core session machine).
add_test(NAME e2e_gateway_pg
         COMMAND ${PF_E2E_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/gateway_e2e.py
                 --binary $<TARGET_FILE:proverfleet> --source ${CMAKE_SOURCE_DIR} --jobs 40
                 --db pg-fresh)
set_tests_properties(e2e_gateway_pg PROPERTIES LABELS e2e TIMEOUT 900 RUN_SERIAL TRUE
  FIXTURES_REQUIRED pg ENVIRONMENT "${PF_TEST_PG_ENV}")
