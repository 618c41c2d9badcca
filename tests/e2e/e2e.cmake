# The gateway's end-to-end tests (tests/e2e): a Curio cluster stand-in (curio_cluster.py: what
# Curio's code does against a cuzk endpoint) written in Python over stubs it generates from
# proto/ at run time (Debian's python3-grpcio and python3-grpc-tools, from
# scripts/install-deps). Debian installs those for the system interpreter only, so the tests
# run /usr/bin/python3 whatever python3 comes first in PATH.
find_program(PF_SYSTEM_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(PF_SYSTEM_PYTHON3)
  set(PF_E2E_PYTHON ${PF_SYSTEM_PYTHON3})
else()
  set(PF_E2E_PYTHON python3)
endif()

# The cluster stand-in's own checks against an in-process fake gateway: MaxPending per node,
# a task retried with the same request_id on the other node, WinPost never retried, wrong proofs
# (PoRep retried, snap accepted), only Prove called, the fake local cuzk. Seconds.
add_test(NAME e2e_curio_cluster_selftest
         COMMAND ${PF_E2E_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/curio_client_selftest.py
                 --proto-dir ${CMAKE_SOURCE_DIR}/proto)
set_tests_properties(e2e_curio_cluster_selftest PROPERTIES LABELS e2e TIMEOUT 120)

# The gateway end to end: market-sim with spawned sim agents + serve with its gateway and a
# fake local cuzk for PoSt, 200 Curio tasks (PoRep, snap, WindowPoSt, WinningPoSt) from 2 Curio
# nodes, an agent SIGKILLed mid-proof and serve SIGKILLed and restarted; every task completed
# with its own proof, none lost or duplicated in the store, no PoSt in the fleet's queue, nothing
# leaked; then serve without local_cuzk refuses a WinningPoSt at once. Simulated time runs 90×
# (a PoRep proof takes about 1 s): about 80 s alone, 90 s beside the other tests on a 2-core
# machine (at 60× 90 s alone). About 20 s of it is Curio's own: after serve's SIGKILL a
# node's channel reconnects on gRPC's default backoff (1 s × 1.6 per try; curio sets none,
# lib/cuzk/client.go:75-84), so Curio sends nothing for that long after serve is back.
add_test(NAME e2e_gateway
         COMMAND ${PF_E2E_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/gateway_e2e.py
                 --binary $<TARGET_FILE:proverfleet> --source ${CMAKE_SOURCE_DIR} --jobs 200
                 --time-scale 90 --second-run-without-local-cuzk)
# Started early (COST) and beside the other tests: its own ports, its own run directory.
set_tests_properties(e2e_gateway PROPERTIES LABELS e2e TIMEOUT 900 COST 105)

# The same run on PostgreSQL (a fresh database on the ctest run's server, fixture pg), with
# fewer jobs: the store is what differs, and the agent kill and the serve restart still happen.
# Here serve is upgraded mid-run instead of killed (--upgrade: `serve --takeover` beside it):
# no Curio call may fail and the old serve must exit 0, on PostgreSQL (make reliability runs the
# same on SQLite with 200 tasks, and the socket-activation crash). About 1.5 minutes: the old
# serve stays until every client connection it had was told to go (35 s).
add_test(NAME e2e_gateway_pg
         COMMAND ${PF_E2E_PYTHON} ${CMAKE_SOURCE_DIR}/tests/e2e/gateway_e2e.py
                 --binary $<TARGET_FILE:proverfleet> --source ${CMAKE_SOURCE_DIR} --jobs 40
                 --time-scale 60 --upgrade --db pg-fresh)
set_tests_properties(e2e_gateway_pg PROPERTIES LABELS e2e TIMEOUT 900 COST 90
  FIXTURES_REQUIRED pg ENVIRONMENT "${PF_TEST_PG_ENV}")
